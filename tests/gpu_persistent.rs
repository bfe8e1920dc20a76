//! GPU correctness of the persistent kernel (`mma = wgmma_ss` tiles, `cuda/humming/persistent.cuh`):
//! W8A8 FP8 with channel, tensor and block scales, W8A8 INT8 with channel scales, W4A8 FP8 and INT8
//! with group scales, W4A8 with channel and tensor scales (signed and unsigned codes), each tile of the catalogue
//! (`humming_spec::tiles::persistent_tiles`) reached by the launches' M.
//!
//! - `gpu_persistent_<format>`: the 8-bit suite of `gpu_act8.rs` (`run` on 16-bit A, M in {1, 7, 16,
//!   20, 33, 200}, N in {128, 320}, K in {256, 1024, 320}, the runtime's K splits and 3 fixed splits,
//!   C poisoned and guarded, every element written, two launches equal, within 2e-3 (f16) / 8e-3
//!   (bf16) of the f64 reference of the quantized activations).
//! - `gpu_persistent_long_k`: K = 8192 on one output tile (no splits), where channel and tensor scales
//!   sum all of K in the wgmma accumulators.
//! - `gpu_persistent_many_tiles`: more output tiles than SMs (each CTA walks several, in raster bands,
//!   the last band short) with an M, N and K tail.
//! - `gpu_persistent_plain_store`: a row stride of C that TMA cannot store (ldc % 8 != 0): the kernel
//!   stores from registers; the columns between rows stay untouched; M = 0 launches nothing.
//! - `gpu_persistent_layout`: weights uploaded for the fragment layout are refused, C untouched.
//! - `gpu_persistent_batch_invariance`: on one declared tile with 2 pinned splits, rows computed
//!   within M = 77 equal the same rows computed alone, bit for bit.
//!
//! Without a GPU (or off compute capability 9.0) every test prints that it was skipped and passes.

use half::{bf16, f16};
use humming::GemmKernel;
use humming::cuda::Gemm;
use humming::quant::QuantizedWeights;
use humming::spec::layout::WeightLayout;
use std::sync::Arc;

#[path = "../humming-runtime/tests/gpu_common/mod.rs"]
mod gpu_common;
use gpu_common::{GUARD, POISON, Rng, gpu_or_skip, seed};

type Stream = Arc<cudarc::driver::CudaStream>;

mod gpu_act8_common;
use gpu_act8_common::{case, random_weights, suite};

humming::gemm! {
    /// W8A8 FP8, channel scales, every persistent tile of the catalogue.
    pub kernel SsChannel { a: e4m3, b: e4m3, c: bf16, scale: channel(f32), arch: [sm_90a], tiles: [
        tile(block = (16, 128, 128), stages = 8, mma = wgmma_ss),
        tile(block = (64, 128, 128), stages = 8, mma = wgmma_ss),
        tile(block = (128, 128, 128), stages = 6, mma = wgmma_ss),
        tile(block = (128, 256, 128), stages = 4, mma = wgmma_ss)] }

    /// W8A8 FP8, a tensor scale, a bias and ReLU, on the (128, 256) tile alone, f16.
    pub kernel SsTensor256 { a: e4m3, b: e4m3, c: f16, scale: tensor(f32), bias: true, epilogue: relu, arch: [sm_90a],
        tiles: [tile(block = (128, 256, 128), stages = 4, mma = wgmma_ss)] }

    /// e5m2 codes, channel scales, on the 8-row and the (256, 128) tiles.
    pub kernel SsE5m2 { a: e5m2, b: e5m2, c: bf16, scale: channel(f32), arch: [sm_90a], tiles: [
        tile(block = (8, 128, 128), stages = 8, mma = wgmma_ss),
        tile(block = (256, 128, 128), stages = 4, mma = wgmma_ss)] }

    /// W8A8 FP8 DeepSeek-V3 style (128 x 128 blocks, 1 x 128 activation groups), every block tile.
    pub kernel SsBlock { a: e4m3, b: e4m3, c: bf16, scale: block(128, 128, f32), arch: [sm_90a], tiles: [
        tile(block = (16, 128, 128), stages = 8, mma = wgmma_ss),
        tile(block = (64, 128, 128), stages = 7, mma = wgmma_ss),
        tile(block = (128, 128, 128), stages = 5, mma = wgmma_ss)] }

    /// Blocks of 64 x 128 (a block scale per warpgroup), f16, on the 32-row tile alone.
    pub kernel SsBlock64 { a: e4m3, b: e4m3, c: f16, scale: block(64, 128, f32), arch: [sm_90a],
        tiles: [tile(block = (32, 128, 128), stages = 8, mma = wgmma_ss)] }

    /// W8A8 INT8 (s8 wgmma, s32 accumulators), channel scales and a bias, the 16- and 128-row tiles.
    pub kernel SsInt8 { a: i8, b: i8, c: bf16, scale: channel(f32), bias: true, arch: [sm_90a], tiles: [
        tile(block = (16, 128, 128), stages = 8, mma = wgmma_ss),
        tile(block = (128, 128, 128), stages = 6, mma = wgmma_ss)] }

    /// W4A8 FP8 (i4 widened to e4m3 in registers, RS wgmma), group scales promoted per stage, every tile.
    pub kernel SsW4a8 { a: e4m3, b: i4, c: bf16, scale: group(128, bf16), arch: [sm_90a], tiles: [
        tile(block = (16, 128, 128), stages = 8, mma = wgmma_ss),
        tile(block = (64, 128, 128), stages = 8, mma = wgmma_ss),
        tile(block = (128, 128, 128), stages = 7, mma = wgmma_ss)] }

    /// W4A8 INT8 (i4 widened to s8, s32 steps promoted into f32), f16, the 16- and 128-row tiles.
    pub kernel SsW4a8Int8 { a: i8, b: i4, c: f16, scale: group(128, f16), arch: [sm_90a], tiles: [
        tile(block = (16, 128, 128), stages = 8, mma = wgmma_ss),
        tile(block = (128, 128, 128), stages = 7, mma = wgmma_ss)] }

    /// Unsigned 4-bit weights under e4m3 with channel scales, a bias and SiLU (no promotion), on the
    /// 64-row and (128, 256) tiles.
    pub kernel SsW4a8Channel { a: e4m3, b: u4, c: f16, scale: channel(f32), bias: true, epilogue: silu,
        arch: [sm_90a], tiles: [
        tile(block = (64, 128, 128), stages = 8, mma = wgmma_ss),
        tile(block = (128, 256, 128), stages = 6, mma = wgmma_ss)] }

    /// W4A8 forms admitted without promotion or with other codes than the suites above: signed codes
    /// under e4m3 with a tensor scale (the one's-complement widening without promotion), unsigned
    /// codes under i8 with channel scales.
    pub kernel SsW4a8Tensor { a: e4m3, b: i4, c: bf16, scale: tensor(f32), arch: [sm_90a],
        tiles: [tile(block = (16, 128, 128), stages = 8, mma = wgmma_ss),
                tile(block = (128, 256, 128), stages = 6, mma = wgmma_ss)] }
    pub kernel SsW4a8Int8U4 { a: i8, b: u4, c: f16, scale: channel(f32), arch: [sm_90a],
        tiles: [tile(block = (128, 128, 128), stages = 7, mma = wgmma_ss)] }

    /// Ping-pong tiles (warp N = block N: the two consumer warpgroups take turns on tiles of their
    /// own): W8A8 FP8 channel, block scales, W4A8 FP8 and INT8 with promoted group scales.
    pub kernel SsPingPong { a: e4m3, b: e4m3, c: bf16, scale: channel(f32), arch: [sm_90a], tiles: [
        tile(block = (64, 128, 128), warp = (64, 128, 128), stages = 8, mma = wgmma_ss),
        tile(block = (128, 128, 128), warp = (128, 128, 128), stages = 6, mma = wgmma_ss),
        tile(block = (256, 64, 128), warp = (256, 64, 128), stages = 4, mma = wgmma_ss)] }
    pub kernel SsBlockPingPong { a: e4m3, b: e4m3, c: f16, scale: block(128, 128, f32), arch: [sm_90a], tiles: [
        tile(block = (64, 128, 128), warp = (64, 128, 128), stages = 7, mma = wgmma_ss),
        tile(block = (128, 64, 128), warp = (128, 64, 128), stages = 7, mma = wgmma_ss)] }
    pub kernel SsW4a8PingPong { a: e4m3, b: i4, c: bf16, scale: group(128, bf16), arch: [sm_90a], tiles: [
        tile(block = (64, 128, 128), warp = (64, 128, 128), stages = 10, mma = wgmma_ss),
        tile(block = (128, 64, 128), warp = (128, 64, 128), stages = 9, mma = wgmma_ss)] }
    pub kernel SsW4a8Int8PingPong { a: i8, b: i4, c: f16, scale: group(128, f16), arch: [sm_90a], tiles: [
        tile(block = (64, 128, 128), warp = (64, 128, 128), stages = 10, mma = wgmma_ss),
        tile(block = (128, 64, 128), warp = (128, 64, 128), stages = 9, mma = wgmma_ss)] }

    /// The same formats as SsChannel on the default tiles (the fragment layout).
    pub kernel FragChannel { a: e4m3, b: e4m3, c: bf16, scale: channel(f32), arch: [sm_90a] }
}

/// The GPU, where it runs wgmma (compute capability 9.0).
fn hopper(name: &str) -> Option<Stream> {
    let s = gpu_or_skip(name)?;
    let (major, minor) = s.context().compute_capability().expect("capability");
    if (major, minor) != (9, 0) {
        eprintln!(
            "skipped: {name} (wgmma_ss tiles need compute capability 9.0; this GPU: {major}.{minor})"
        );
        return None;
    }
    Some(s)
}

fn persistent_suite<T: humming::Element, K: GemmKernel<A = T, C = T>>(name: &str) {
    if hopper(name).is_none() {
        return;
    }
    suite::<T, K>(name);
}

#[test]
fn gpu_persistent_w8a8_fp8_channel() {
    persistent_suite::<bf16, SsChannel>("gpu_persistent_w8a8_fp8_channel");
}
#[test]
fn gpu_persistent_w8a8_fp8_tensor_256_relu() {
    persistent_suite::<f16, SsTensor256>("gpu_persistent_w8a8_fp8_tensor_256_relu");
}
#[test]
fn gpu_persistent_e5m2() {
    persistent_suite::<bf16, SsE5m2>("gpu_persistent_e5m2");
}
#[test]
fn gpu_persistent_w8a8_int8() {
    persistent_suite::<bf16, SsInt8>("gpu_persistent_w8a8_int8");
}
#[test]
fn gpu_persistent_w8a8_fp8_block() {
    persistent_suite::<bf16, SsBlock>("gpu_persistent_w8a8_fp8_block");
}
#[test]
fn gpu_persistent_w8a8_fp8_block_64() {
    persistent_suite::<f16, SsBlock64>("gpu_persistent_w8a8_fp8_block_64");
}

#[test]
fn gpu_persistent_w4a8_fp8() {
    persistent_suite::<bf16, SsW4a8>("gpu_persistent_w4a8_fp8");
}
#[test]
fn gpu_persistent_w4a8_int8() {
    persistent_suite::<f16, SsW4a8Int8>("gpu_persistent_w4a8_int8");
}
#[test]
fn gpu_persistent_w4a8_channel_u4() {
    persistent_suite::<f16, SsW4a8Channel>("gpu_persistent_w4a8_channel_u4");
}

#[test]
fn gpu_persistent_w4a8_tensor() {
    persistent_suite::<bf16, SsW4a8Tensor>("gpu_persistent_w4a8_tensor");
}
#[test]
fn gpu_persistent_w4a8_int8_u4_channel() {
    persistent_suite::<f16, SsW4a8Int8U4>("gpu_persistent_w4a8_int8_u4_channel");
}

#[test]
fn gpu_persistent_ping_pong() {
    persistent_suite::<bf16, SsPingPong>("gpu_persistent_ping_pong");
}
#[test]
fn gpu_persistent_ping_pong_block() {
    persistent_suite::<f16, SsBlockPingPong>("gpu_persistent_ping_pong_block");
}
#[test]
fn gpu_persistent_ping_pong_w4a8() {
    persistent_suite::<bf16, SsW4a8PingPong>("gpu_persistent_ping_pong_w4a8");
}
#[test]
fn gpu_persistent_ping_pong_w4a8_int8() {
    persistent_suite::<f16, SsW4a8Int8PingPong>("gpu_persistent_ping_pong_w4a8_int8");
}

/// A long K (8192, 64 stages) on one output tile without K splits: the forms that sum all of K in the
/// wgmma accumulators (channel scales, no promotion) and a promoted one, within the suites' tolerance.
#[test]
fn gpu_persistent_long_k() {
    let name = "gpu_persistent_long_k";
    let Some(s) = hopper(name) else { return };
    let sd = seed();
    let mut rng = Rng::new(sd);
    let (n, k) = (128, 8192);
    fn one<K: humming::GemmKernel<A = f16, C = f16>>(
        s: &Stream,
        rng: &mut Rng,
        m: usize,
        (n, k): (usize, usize),
        label: &str,
    ) -> f64 {
        let gemm = Gemm::<f16, f16>::load::<K>(s).expect("load");
        let w = QuantizedWeights::quantize(&K::DESCRIPTOR, n, k, &random_weights(rng, n, k))
            .expect("quantize");
        let dw = gemm.upload(&w).expect("upload");
        case(s, &gemm, &w, &dw, m, rng, label).0
    }
    for m in [16, 200] {
        let e4 = one::<SsW4a8Channel>(
            &s,
            &mut rng,
            m,
            (n, k),
            &format!("{name} SsW4a8Channel M={m} seed={sd}"),
        );
        let e8 = one::<SsTensor256>(
            &s,
            &mut rng,
            m,
            (n, k),
            &format!("{name} SsTensor256 M={m} seed={sd}"),
        );
        let g = one::<SsW4a8Int8>(
            &s,
            &mut rng,
            m,
            (n, k),
            &format!("{name} SsW4a8Int8 M={m} seed={sd}"),
        );
        eprintln!(
            "{name}: M={m} K={k}: relative error {e4:.2e} (W4A8 channel), {e8:.2e} (W8A8 tensor), {g:.2e} (W4A8 INT8 group)"
        );
    }
}

#[test]
fn gpu_persistent_many_tiles() {
    let name = "gpu_persistent_many_tiles";
    let Some(s) = hopper(name) else { return };
    let sd = seed();
    let mut rng = Rng::new(sd);
    for (m, n, k) in [(1500, 2112, 384), (700, 4160, 256)] {
        let gemm = Gemm::<bf16, bf16>::load::<SsChannel>(&s).expect("load");
        let w = QuantizedWeights::quantize(
            &SsChannel::DESCRIPTOR,
            n,
            k,
            &random_weights(&mut rng, n, k),
        )
        .expect("quantize");
        let dw = gemm.upload(&w).expect("upload");
        let label = format!("{name} SsChannel M={m} N={n} K={k} seed={sd}");
        let (e, _) = case(&s, &gemm, &w, &dw, m, &mut rng, &label);
        let gb = Gemm::<bf16, bf16>::load::<SsBlock>(&s).expect("load");
        let wb =
            QuantizedWeights::quantize(&SsBlock::DESCRIPTOR, n, k, &random_weights(&mut rng, n, k))
                .expect("quantize");
        let db = gb.upload(&wb).expect("upload");
        let label = format!("{name} SsBlock M={m} N={n} K={k} seed={sd}");
        let (eb, _) = case(&s, &gb, &wb, &db, m, &mut rng, &label);
        let g4 = Gemm::<bf16, bf16>::load::<SsW4a8>(&s).expect("load");
        let w4 =
            QuantizedWeights::quantize(&SsW4a8::DESCRIPTOR, n, k, &random_weights(&mut rng, n, k))
                .expect("quantize");
        let d4 = g4.upload(&w4).expect("upload");
        let label = format!("{name} SsW4a8 M={m} N={n} K={k} seed={sd}");
        let (e4, _) = case(&s, &g4, &w4, &d4, m, &mut rng, &label);
        eprintln!(
            "{name}: M={m} N={n} K={k}: relative error {e:.2e} (channel), {eb:.2e} (block), {e4:.2e} (W4A8)"
        );
    }
}

#[test]
fn gpu_persistent_plain_store() {
    let name = "gpu_persistent_plain_store";
    let Some(s) = hopper(name) else { return };
    let sd = seed();
    let mut rng = Rng::new(sd);
    let gemm = Gemm::<bf16, bf16>::load::<SsChannel>(&s).expect("load");
    let (m, n, k) = (77, 320, 512);
    let ldc = n + 6; // not a multiple of 8: no TMA store
    let w = QuantizedWeights::quantize(
        &SsChannel::DESCRIPTOR,
        n,
        k,
        &random_weights(&mut rng, n, k),
    )
    .expect("quantize");
    let dw = gemm.upload(&w).expect("upload");
    assert_eq!(dw.layout(), WeightLayout::KMajor, "{name}: layout");
    let a_host: Vec<bf16> = (0..m * k).map(|_| bf16::from_f32(rng.uniform())).collect();
    let a = s.clone_htod(&a_host).expect("A");
    let len = (m - 1) * ldc + n;
    let mut c = s
        .clone_htod(&vec![bf16::from_bits(POISON); len + GUARD])
        .expect("C");
    // M = 0: checked, nothing launched.
    gemm.run_strided(&a, 0, k, &dw, None, &mut c, ldc)
        .expect("M = 0");
    gemm.run_strided(&a, m, k, &dw, None, &mut c, ldc)
        .expect("run");
    let got: Vec<u16> = s
        .clone_dtoh(&c)
        .expect("C")
        .iter()
        .map(|v| v.to_bits())
        .collect();
    let qa = humming::act_quant::quantize_activations(
        &a_host.iter().map(|v| v.to_f32()).collect::<Vec<_>>(),
        m,
        k,
        SsChannel::DESCRIPTOR.a,
        humming::act_quant::ActScale::PerToken,
    )
    .expect("quantize A");
    let want = humming::reference::reference_gemm(&w, &qa.dequantize(), m, None).expect("ref");
    let mut rows = Vec::with_capacity(m * n);
    for (i, &b) in got.iter().enumerate() {
        let (r, col) = (i / ldc, i % ldc);
        if i < len && col < n {
            rows.push(bf16::from_bits(b).to_f64());
            assert!(
                rows.last().unwrap().is_finite(),
                "{name}: C[{r}, {col}] not written"
            );
        } else {
            assert_eq!(
                b, POISON,
                "{name}: element {i} outside C's rows was written"
            );
        }
    }
    let err = humming::reference::relative_error(&rows, &want);
    assert!(err <= 8e-3, "{name}: relative error {err:.3e} (seed {sd})");
    eprintln!("{name}: relative error {err:.2e}");
}

#[test]
fn gpu_persistent_layout() {
    let name = "gpu_persistent_layout";
    let Some(s) = hopper(name) else { return };
    let mut rng = Rng::new(seed());
    let (m, n, k) = (16, 256, 256);
    let frag = Gemm::<bf16, bf16>::load::<FragChannel>(&s).expect("load");
    let ss = Gemm::<bf16, bf16>::load::<SsChannel>(&s).expect("load");
    assert_eq!(
        (frag.layout(), ss.layout()),
        (WeightLayout::Fragments, WeightLayout::KMajor)
    );
    let w = QuantizedWeights::quantize(
        &FragChannel::DESCRIPTOR,
        n,
        k,
        &random_weights(&mut rng, n, k),
    )
    .expect("quantize");
    let dw = frag.upload(&w).expect("upload");
    let a = s.clone_htod(&vec![bf16::ONE; m * k]).expect("A");
    let mut c = s
        .clone_htod(&vec![bf16::from_bits(POISON); m * n])
        .expect("C");
    let e = ss.run(&a, m, &dw, None, &mut c);
    assert!(
        matches!(&e, Err(humming::Error::InvalidArgument { arg, .. }) if *arg == "weights"),
        "{name}: fragment-layout weights accepted: {e:?}"
    );
    let back: Vec<u16> = s
        .clone_dtoh(&c)
        .expect("C")
        .iter()
        .map(|v| v.to_bits())
        .collect();
    assert!(
        back.iter().all(|&b| b == POISON),
        "{name}: C written after an error"
    );
    eprintln!("{name}: pass");
}

/// Batch invariance on one persistent tile with pinned splits: rows computed within M = 77 equal the
/// same rows computed alone, bit for bit.
#[test]
fn gpu_persistent_batch_invariance() {
    let name = "gpu_persistent_batch_invariance";
    let Some(s) = hopper(name) else { return };
    let mut rng = Rng::new(seed());
    let mut gemm = Gemm::<f16, f16>::load::<SsTensor256>(&s).expect("load");
    let mut o = gemm.options();
    o.split_k = humming::cuda::SplitK::Fixed(std::num::NonZeroUsize::new(2).unwrap());
    gemm.set_options(o);
    let (m, n, k) = (77, 320, 1024);
    let w = QuantizedWeights::quantize(
        &SsTensor256::DESCRIPTOR,
        n,
        k,
        &random_weights(&mut rng, n, k),
    )
    .expect("quantize");
    let dw = gemm.upload(&w).expect("upload");
    let bias = s
        .clone_htod(
            &(0..n)
                .map(|_| f16::from_f32(rng.uniform()))
                .collect::<Vec<_>>(),
        )
        .expect("bias");
    let a_host: Vec<f16> = (0..m * k).map(|_| f16::from_f32(rng.uniform())).collect();
    let run = |a: &[f16], rows: usize| -> Vec<u16> {
        let a = s.clone_htod(a).expect("A");
        let mut c = s
            .clone_htod(&vec![f16::from_bits(POISON); rows * n])
            .expect("C");
        gemm.run(&a, rows, &dw, Some(&bias), &mut c).expect("run");
        s.clone_dtoh(&c)
            .expect("C")
            .iter()
            .map(|v| v.to_bits())
            .collect()
    };
    let all = run(&a_host, m);
    for r in [0, 1, 40, 76] {
        let alone = run(&a_host[r * k..(r + 1) * k], 1);
        assert_eq!(
            alone,
            all[r * n..(r + 1) * n],
            "{name}: row {r} alone differs from row {r} of M = {m}"
        );
    }
    eprintln!("{name}: pass");
}

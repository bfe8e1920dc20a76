//! GPU correctness of 8-bit activations (W4A8, W8A8 FP8 and INT8) and their input quantization.
//!
//! - `gpu_act8_quantize_*`: the input-quantization kernel equals `act_quant::quantize_activations`
//!   bit for bit (codes and scales): e4m3, e5m2 and i8; per token, per group of 128 and 64, and a
//!   static tensor scale that saturates; a zero row (scale 0, zero codes), rows with outliers.
//! - `gpu_act8_<format>`: W4A8 FP8 (i4 / u4, zero points, group / channel scales), e5m2, W4A8 INT8,
//!   W8A8 INT8 and FP8 (channel, tensor, and 128 x 128 / 64 x 128 blocks with 1 x 128 activation
//!   groups, also on each wgmma tile alone), W4A8 FP8 on the 128-row wgmma tile alone, MXFP4 x e4m3 and e2m1 x e5m2: `run` on 16-bit A (quantized
//!   per token, or per activation group, by the runtime) over M in {1, 7, 16, 20, 33, 200} (every tile), K in {256, 1024, 320}, N in {128, 320}, with the runtime's K
//!   splits and with 3 fixed splits: C poisoned first and guarded, every element written and finite,
//!   equal over two launches, and within 2e-3 (f16) / 8e-3 (bf16) relative error of the f64
//!   reference on the same quantized activations (`reference_gemm` of `dequantize()`). Row 0 of A is
//!   zero and row 1 holds an outlier. The error that activation quantization adds against the
//!   16-bit product is printed beside it.
//! - `gpu_act8_static_scale`: `quantize_activations` with a static scale that saturates, then
//!   `run_quantized`, against the reference of the same codes.
//!
//! Without a GPU every test prints that it was skipped and passes.

use half::{bf16, f16};
use humming::act_quant::{ActScale, quantize_activations};
use humming::cuda::Gemm;
use humming::quant::QuantizedWeights;
use humming::{Element, GemmKernel, reference};
use std::sync::Arc;

#[path = "../humming-runtime/tests/gpu_common/mod.rs"]
mod gpu_common;
use gpu_common::{POISON, Rng, gpu_or_skip, seed};

type Stream = Arc<cudarc::driver::CudaStream>;

mod gpu_act8_common;
use gpu_act8_common::{random_a, random_weights, suite, to_f32};

humming::gemm! {
    /// W4A8 FP8, GPTQ-style symmetric 4-bit weights, group 128 (sm_89 compile-checked).
    pub kernel E4I4G128 { a: e4m3, b: i4, c: f16, scale: group(128, f16), arch: [sm_89, sm_90a] }

    /// W4A8 FP8, AWQ-style zero points, group 64, bf16 output.
    pub kernel E4U4Zp { a: e4m3, b: u4, c: bf16, scale: group(64, bf16), zero_point: int, arch: [sm_90a] }

    /// W4A8 FP8, unsigned codes, channel scales with a bias.
    pub kernel E4U4Ch { a: e4m3, b: u4, c: f16, scale: channel(f32), bias: true, arch: [sm_90a] }

    /// e5m2 activations, symmetric 4-bit weights, group 32.
    pub kernel E5I4G32 { a: e5m2, b: i4, c: bf16, scale: group(32, bf16), arch: [sm_90a] }

    /// W4A8 INT8, symmetric 4-bit weights, channel scales (sm_80 compiled too).
    pub kernel S8I4Ch { a: i8, b: i4, c: f16, scale: channel(f32), arch: [sm_80, sm_90a] }

    /// W4A8 INT8 with zero points, group 128.
    pub kernel S8U4Zp { a: i8, b: u4, c: bf16, scale: group(128, bf16), zero_point: int, arch: [sm_90a] }

    /// W8A8 INT8 (SmoothQuant: channel weight scales, token activation scales) with a bias.
    pub kernel S8S8Ch { a: i8, b: i8, c: bf16, scale: channel(f32), bias: true, arch: [sm_80, sm_90a] }

    /// W8A8 FP8, channel scales.
    pub kernel E4E4Ch { a: e4m3, b: e4m3, c: bf16, scale: channel(f32), arch: [sm_89, sm_90a] }

    /// W4A8 MXFP4: e2m1 weights with ue8m0 scales of 32 under e4m3 activations, bf16.
    pub kernel E4Mxfp4 { a: e4m3, b: e2m1, c: bf16, scale: group(32, ue8m0), arch: [sm_90a] }

    /// e2m1 weights with f32 group scales of 64 and a bias under e5m2, bf16.
    pub kernel E5Fp4Bias { a: e5m2, b: e2m1, c: bf16, scale: group(64, f32), bias: true, arch: [sm_90a] }

    /// W8A8 FP8 DeepSeek-V3 style: 128 x 128 weight blocks, activations in 1 x 128 groups.
    pub kernel E4E4Block { a: e4m3, b: e4m3, c: bf16, scale: block(128, 128, f32), arch: [sm_89, sm_90a] }

    /// W8A8 FP8 blocks of 64 x 128 (1 x 128 activation groups) on the wgmma tile alone, f16.
    pub kernel E4E4BlockWg { a: e4m3, b: e4m3, c: f16, scale: block(64, 128, f32), arch: [sm_90a], tiles: [tile(block = (64, 128, 128), warp = (64, 32, 64), stages = 4, mma = wgmma)] }

    /// W4A8 FP8 on the 128-row promoting wgmma tile alone (warps of 16 channels), bf16, group 64.
    pub kernel E4I4Wg128 { a: e4m3, b: i4, c: bf16, scale: group(64, bf16), arch: [sm_90a], tiles: [tile(block = (128, 128, 64), warp = (128, 16, 64), stages = 4, mma = wgmma)] }

    /// W8A8 FP8 128 x 128 blocks on the 128-row promoting wgmma tile alone, bf16.
    pub kernel E4E4BlockWg128 { a: e4m3, b: e4m3, c: bf16, scale: block(128, 128, f32), arch: [sm_90a], tiles: [tile(block = (128, 128, 64), warp = (128, 16, 64), stages = 4, mma = wgmma)] }

    /// W8A8 FP8, a tensor scale, a bias and SiLU.
    pub kernel E4E4Silu { a: e4m3, b: e4m3, c: f16, scale: tensor(f32), bias: true, epilogue: silu, arch: [sm_90a] }
}

#[test]
fn gpu_act8_w4a8_e4m3_i4_g128() {
    suite::<f16, E4I4G128>("gpu_act8_w4a8_e4m3_i4_g128");
}
#[test]
fn gpu_act8_w4a8_e4m3_u4_zp_bf16() {
    suite::<bf16, E4U4Zp>("gpu_act8_w4a8_e4m3_u4_zp_bf16");
}
#[test]
fn gpu_act8_w4a8_e4m3_u4_channel_bias() {
    suite::<f16, E4U4Ch>("gpu_act8_w4a8_e4m3_u4_channel_bias");
}
#[test]
fn gpu_act8_e5m2_i4_g32() {
    suite::<bf16, E5I4G32>("gpu_act8_e5m2_i4_g32");
}
#[test]
fn gpu_act8_w4a8_i8_i4_channel() {
    suite::<f16, S8I4Ch>("gpu_act8_w4a8_i8_i4_channel");
}
#[test]
fn gpu_act8_w4a8_i8_u4_zp() {
    suite::<bf16, S8U4Zp>("gpu_act8_w4a8_i8_u4_zp");
}
#[test]
fn gpu_act8_w8a8_int8_bias() {
    suite::<bf16, S8S8Ch>("gpu_act8_w8a8_int8_bias");
}
#[test]
fn gpu_act8_w8a8_fp8_channel() {
    suite::<bf16, E4E4Ch>("gpu_act8_w8a8_fp8_channel");
}
#[test]
fn gpu_act8_w8a8_fp8_block() {
    suite::<bf16, E4E4Block>("gpu_act8_w8a8_fp8_block");
}
#[test]
fn gpu_act8_w8a8_fp8_block_wgmma() {
    suite::<f16, E4E4BlockWg>("gpu_act8_w8a8_fp8_block_wgmma");
}
#[test]
fn gpu_act8_w4a8_wgmma_128() {
    suite::<bf16, E4I4Wg128>("gpu_act8_w4a8_wgmma_128");
}
#[test]
fn gpu_act8_w8a8_fp8_block_wgmma_128() {
    suite::<bf16, E4E4BlockWg128>("gpu_act8_w8a8_fp8_block_wgmma_128");
}
#[test]
fn gpu_act8_w4a8_mxfp4() {
    suite::<bf16, E4Mxfp4>("gpu_act8_w4a8_mxfp4");
}
#[test]
fn gpu_act8_e5m2_fp4_bias() {
    suite::<bf16, E5Fp4Bias>("gpu_act8_e5m2_fp4_bias");
}
#[test]
fn gpu_act8_w8a8_fp8_tensor_silu() {
    suite::<f16, E4E4Silu>("gpu_act8_w8a8_fp8_tensor_silu");
}

/// The device quantization of `a` equals the CPU's bit for bit.
fn quantize_case<T: Element, K: GemmKernel<A = T, C = T>>(
    s: &Stream,
    gemm: &Gemm<T, T>,
    a_host: &[T],
    m: usize,
    k: usize,
    how: ActScale,
    label: &str,
) {
    let a = s.clone_htod(a_host).expect("A");
    let dev = gemm
        .quantize_activations(&a, m, k, k, how)
        .unwrap_or_else(|e| panic!("{label}: {e}"))
        .to_host()
        .unwrap_or_else(|e| panic!("{label}: {e}"));
    let cpu = quantize_activations(&to_f32(a_host), m, k, K::DESCRIPTOR.a, how).expect("cpu");
    assert_eq!(dev.scales.len(), cpu.scales.len(), "{label}: scales");
    for (i, (d, c)) in dev.scales.iter().zip(&cpu.scales).enumerate() {
        assert_eq!(d.to_bits(), c.to_bits(), "{label}: scale {i}: {d} vs {c}");
    }
    for (i, (d, c)) in dev.codes.iter().zip(&cpu.codes).enumerate() {
        assert_eq!(d, c, "{label}: code {i} (row {}, column {})", i / k, i % k);
    }
}

fn quantize_suite<T: Element, K: GemmKernel<A = T, C = T>>(name: &str) {
    let Some(s) = gpu_or_skip(name) else { return };
    let sd = seed();
    let mut rng = Rng::new(sd);
    let gemm = Gemm::load::<K>(&s).unwrap_or_else(|e| panic!("{name}: load: {e}"));
    for &(m, k) in &[(1usize, 64usize), (5, 1024), (37, 4096), (300, 320)] {
        let mut a = random_a::<T>(&mut rng, m, k);
        // Values across the binades, and a row far beyond a static scale's range.
        for (i, v) in a.iter_mut().enumerate().skip(k) {
            if i % 7 == 0 {
                *v = T::from_f32(rng.uniform() * 2f32.powi(rng.below(20) as i32 - 10));
            }
        }
        for how in [
            ActScale::PerToken,
            ActScale::PerGroup(128),
            ActScale::PerGroup(64),
            ActScale::Tensor(1.0 / 1024.0),
            ActScale::Tensor(0.37),
        ] {
            let label = format!("{name} M={m} K={k} {how:?} seed={sd}");
            quantize_case::<T, K>(&s, &gemm, &a, m, k, how, &label);
        }
    }
    eprintln!("{name}: pass");
}

#[test]
fn gpu_act8_quantize_e4m3_f16() {
    quantize_suite::<f16, E4I4G128>("gpu_act8_quantize_e4m3_f16");
}
#[test]
fn gpu_act8_quantize_e4m3_bf16() {
    quantize_suite::<bf16, E4U4Zp>("gpu_act8_quantize_e4m3_bf16");
}
#[test]
fn gpu_act8_quantize_e5m2() {
    quantize_suite::<bf16, E5I4G32>("gpu_act8_quantize_e5m2");
}
#[test]
fn gpu_act8_quantize_i8() {
    quantize_suite::<f16, S8I4Ch>("gpu_act8_quantize_i8");
}

/// `quantize_activations(how)` on the GPU, then `run_quantized` into a poisoned C: C read back, every
/// element written, and the CPU quantization of the same A (the reference's codes).
#[allow(clippy::too_many_arguments)]
fn run_quantized_case<T: Element>(
    s: &Stream,
    gemm: &Gemm<T, T>,
    dw: &humming::cuda::DeviceWeights,
    a_host: &[T],
    m: usize,
    k: usize,
    how: ActScale,
    name: &str,
) -> (Vec<f64>, humming::act_quant::QuantizedActivations) {
    let n = dw.n();
    let a = s.clone_htod(a_host).expect("A");
    let qa = gemm
        .quantize_activations(&a, m, k, k, how)
        .expect("quantize");
    let mut c = s.clone_htod(&vec![T::from_bits(POISON); m * n]).expect("C");
    gemm.run_quantized(&qa, dw, None, &mut c).expect("run");
    let got: Vec<f64> = s
        .clone_dtoh(&c)
        .expect("C")
        .iter()
        .map(|v| v.to_f64())
        .collect();
    assert!(got.iter().all(|v| v.is_finite()), "{name}: C not written");
    let cpu = quantize_activations(&to_f32(a_host), m, k, gemm.spec().a, how).expect("q");
    (got, cpu)
}

#[test]
fn gpu_act8_static_scale() {
    let name = "gpu_act8_static_scale";
    let Some(s) = gpu_or_skip(name) else { return };
    let sd = seed();
    let mut rng = Rng::new(sd);
    let gemm = Gemm::<f16, f16>::load::<E4I4G128>(&s).expect("load");
    let (m, n, k) = (24, 256, 512);
    let w =
        QuantizedWeights::quantize(&E4I4G128::DESCRIPTOR, n, k, &random_weights(&mut rng, n, k))
            .expect("quantize");
    let dw = gemm.upload(&w).expect("upload");
    let a_host = random_a::<f16>(&mut rng, m, k);
    // 1/256: values above 448/256 = 1.75 saturate (the outlier of row 1).
    let how = ActScale::Tensor(1.0 / 256.0);
    let (got, cpu) = run_quantized_case(&s, &gemm, &dw, &a_host, m, k, how, name);
    assert!(cpu.codes.contains(&0x7E), "{name}: no code saturated");
    let want = reference::reference_gemm(&w, &cpu.dequantize(), m, None).expect("ref");
    let err = reference::relative_error(&got, &want);
    assert!(err <= 2e-3, "{name}: relative error {err:.3e} (seed {sd})");
    eprintln!("{name}: relative error {err:.2e}");
}

/// Block-scaled W8A8 FP8 on activations quantized apart, per 1 x 128 group; activations of other
/// scales than a kernel's are refused (nothing written).
#[test]
fn gpu_act8_block_run_quantized() {
    let name = "gpu_act8_block_run_quantized";
    let Some(s) = gpu_or_skip(name) else { return };
    let sd = seed();
    let mut rng = Rng::new(sd);
    let gemm = Gemm::<bf16, bf16>::load::<E4E4Block>(&s).expect("load");
    let (m, n, k) = (40, 256, 640);
    let w = QuantizedWeights::quantize(
        &E4E4Block::DESCRIPTOR,
        n,
        k,
        &random_weights(&mut rng, n, k),
    )
    .expect("quantize");
    let dw = gemm.upload(&w).expect("upload");
    let a_host = random_a::<bf16>(&mut rng, m, k);
    let a = s.clone_htod(&a_host).expect("A");
    let poison = vec![bf16::from_bits(POISON); m * n];
    for how in [
        ActScale::PerToken,
        ActScale::PerGroup(64),
        ActScale::Tensor(1.0 / 64.0),
    ] {
        let qa = gemm.quantize_activations(&a, m, k, k, how).expect("q");
        let mut c = s.clone_htod(&poison).expect("C");
        let e = gemm.run_quantized(&qa, &dw, None, &mut c);
        assert!(
            matches!(e, Err(humming::Error::InvalidArgument { .. })),
            "{name}: {how:?} accepted: {e:?}"
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
    }
    let how = ActScale::PerGroup(128);
    let (got, cpu) = run_quantized_case(&s, &gemm, &dw, &a_host, m, k, how, name);
    let want = reference::reference_gemm(&w, &cpu.dequantize(), m, None).expect("ref");
    let err = reference::relative_error(&got, &want);
    assert!(err <= 8e-3, "{name}: relative error {err:.3e} (seed {sd})");
    // A channel-scaled kernel refuses group scales.
    let ch = Gemm::<bf16, bf16>::load::<E4E4Ch>(&s).expect("load");
    let qg = ch.quantize_activations(&a, m, k, k, how).expect("q");
    let wc = QuantizedWeights::quantize(&E4E4Ch::DESCRIPTOR, n, k, &random_weights(&mut rng, n, k))
        .expect("quantize");
    let dwc = ch.upload(&wc).expect("upload");
    let mut c = s.clone_htod(&poison).expect("C");
    assert!(matches!(
        ch.run_quantized(&qg, &dwc, None, &mut c),
        Err(humming::Error::InvalidArgument { .. })
    ));
    eprintln!("{name}: relative error {err:.2e}");
}

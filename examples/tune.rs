//! Tile exploration: times one weight format under several tile configurations (compiled at run time
//! with NVRTC) on the given shapes, by CUDA-graph replay with weights rotated through more memory than
//! the L2 cache (`common::timing::replay`). A development tool for choosing the default tiles;
//! `examples/bench.rs` is the benchmark that compares against cuBLAS and humming-kernels.
//!
//! ```text
//! cargo run --release --example tune -- --format "a: f16, b: i4, scale: group(128)" \
//!     --tiles "16,128,128,4;16,64,256,4;64,256,128,4,wgmma" --shapes 8192x8192 --ms 1,16
//! ```

use clap::Parser;
use half::f16;
use humming::cuda::{self, DependentTrigger, Gemm, KReduction, LaunchOptions, Reduction, SplitK};
use humming::quant::QuantizedWeights;
use humming::spec::parse_kernel_str;
use std::num::NonZeroUsize;

mod common;
use common::host::{quantize_parallel, random_matrix, to_elements};
use common::timing::{Res, copy_bandwidth, replay};

#[derive(Parser)]
struct Args {
    /// Weight format, as gemm! fields (without `tiles`, and without `arch` when a tile is wgmma).
    #[arg(long, default_value = "a: f16, b: i4, scale: group(128)")]
    format: String,
    /// Tile configurations `bm,bn,bk,stages[,warp_m]` or `bm,bn,bk,stages[,warp_n],wgmma` separated by
    /// `;` (`,wgmma`: the Hopper wgmma kernel, warp (bm, warp_n, 64), or gemm!'s default without
    /// warp_n, e.g. `128,128,64,4,wgmma`), each optionally ending in `,cN` (`ctas_per_sm = N`, e.g.
    /// `16,128,256,3,16,c2`). Empty: the defaults.
    #[arg(long, default_value = "")]
    tiles: String,
    /// Shapes `NxK`, comma separated.
    #[arg(long, default_value = "4096x4096,8192x8192,28672x4096,4096x14336")]
    shapes: String,
    /// Values of M, comma separated.
    #[arg(long, default_value = "1,16,64,256")]
    ms: String,
    /// Also time with split-K off.
    #[arg(long)]
    no_split: bool,
    /// Numbers of K splits to time, comma separated; 0 = the automatic choice.
    #[arg(long, default_value = "0")]
    splits: String,
    /// Launch without programmatic dependent launch (the runtime's default uses it on compute
    /// capability 9.0+ for tiles of which at most two CTAs fit per SM).
    #[arg(long)]
    no_pdl: bool,
    /// Sum K splits through the global workspace instead of a thread-block cluster
    /// (`LaunchOptions::cluster_reduction: false`).
    #[arg(long)]
    no_cluster: bool,
    /// Where programmatic dependent launch lets the next launch start (`LaunchOptions::dependent_trigger`):
    /// `auto` (the runtime's rule), `early` (kernel start) or `late` (after the main loop).
    #[arg(long, default_value = "auto")]
    pdl_trigger: String,
    /// Add the K splits into C with f16 atomics where the tile can (`Reduction::AtomicF16`, opt-in)
    /// instead of summing them in split order.
    #[arg(long)]
    atomic_f16: bool,
    /// Stream-K settings to time, comma separated (`LaunchOptions::stream_k`): `off` (the default) or a
    /// number of CTAs.
    #[arg(long, default_value = "off")]
    stream_k: String,
}

fn parse_list<T: std::str::FromStr>(s: &str) -> Vec<T> {
    s.split(',')
        .filter(|x| !x.is_empty())
        .filter_map(|x| x.trim().parse().ok())
        .collect()
}

/// The `tiles:` field of each `--tiles` entry (`bm,bn,bk,stages[,warp_m]` or
/// `bm,bn,bk,stages[,warp_n],wgmma`, optionally ending in `,cN` for `ctas_per_sm = N`), or one empty
/// string for the defaults.
fn tile_fields(tiles: &str) -> Result<Vec<String>, String> {
    if tiles.is_empty() {
        return Ok(vec![String::new()]);
    }
    tiles
        .split(';')
        .map(|t| {
            let mut words: Vec<&str> = t.split(',').map(str::trim).collect();
            let ctas = match words.last().and_then(|w| w.strip_prefix('c')) {
                Some(n) => {
                    let n = n.parse::<u32>().map_err(|_| format!("tile `{t}`: expected `cN`"))?;
                    words.pop();
                    format!(", ctas_per_sm = {n}")
                }
                None => String::new(),
            };
            let mma = if words.last() == Some(&"wgmma") {
                words.pop();
                "wgmma"
            } else {
                "sync"
            };
            let v = words
                .iter()
                .map(|w| w.parse::<u32>())
                .collect::<Result<Vec<u32>, _>>()
                .map_err(|_| format!("tile `{t}`: expected numbers, optionally ending in `wgmma`"))?;
            if !(4..=5).contains(&v.len()) {
                return Err(format!(
                    "tile `{t}`: expected bm,bn,bk,stages[,warp_m] or bm,bn,bk,stages[,warp_n],wgmma"
                ));
            }
            // A wgmma tile: warps over all block M rows, warp N given, else gemm!'s default (block N / 4,
            // or block N / 8 where that would exceed 128 accumulators per thread). An mma.sync tile:
            // warp M given, else min(block M, 64).
            let warp = match (mma, v.get(4)) {
                ("wgmma", Some(wn)) => format!(", warp = ({}, {wn}, 64)", v[0]),
                ("wgmma", None) => String::new(),
                (_, wm) => format!(", warp = ({}, 64, 64)", wm.copied().unwrap_or(v[0].min(64))),
            };
            // A kernel whose only tile is wgmma targets sm_90a alone (a rule of gemm!).
            let arch = if mma == "wgmma" { ", arch: [sm_90a]" } else { "" };
            Ok(format!(
                "{arch}, tiles: [tile(block = ({}, {}, {}){warp}, stages = {}, mma = {mma}{ctas})]",
                v[0], v[1], v[2], v[3]
            ))
        })
        .collect()
}

fn main() -> Res<()> {
    let args = Args::parse();
    let tile_specs = tile_fields(&args.tiles)?;
    let sk_modes: Vec<Option<usize>> = args
        .stream_k
        .split(',')
        .filter_map(|x| match x.trim() {
            "off" => Some(None),
            v => v.parse().ok().map(Some),
        })
        .collect();
    let stream = match cuda::default_stream(0) {
        Ok(s) => s,
        Err(e) => {
            println!("no GPU: {e}");
            return Ok(());
        }
    };
    let ctx = stream.context().clone();
    // SAFETY: called before any buffer used in graph capture is allocated.
    unsafe { ctx.disable_event_tracking() };
    let bw = copy_bandwidth(&stream, 1 << 30)?;
    println!("copy bandwidth {:.2} TB/s (read + write)", bw / 1e12);
    for (si, shape) in args.shapes.split(',').enumerate() {
        let Some((n, k)) = shape.split_once('x') else {
            continue;
        };
        let (n, k): (usize, usize) = (n.parse()?, k.parse()?);
        let base = parse_kernel_str(&args.format)?;
        let w = random_matrix(n, k, (si as u64 + 1) << 40, true);
        let q = quantize_parallel(&base, n, k, &w)?;
        let packed = q.pack()?;
        let wbytes = packed.b.len() + 2 * packed.scales.len() + 2 * packed.zeros.len();
        let copies = (512usize << 20).div_ceil(wbytes).clamp(2, 16);
        for ts in &tile_specs {
            let spec = parse_kernel_str(&format!("{}{ts}", args.format))?;
            let gemm = Gemm::<f16, f16>::compile(&stream, "tune", spec)?;
            let base_options = LaunchOptions {
                programmatic_launch: !args.no_pdl,
                reduction: if args.atomic_f16 {
                    Reduction::AtomicF16
                } else {
                    Reduction::Deterministic
                },
                cluster_reduction: !args.no_cluster,
                dependent_trigger: match args.pdl_trigger.as_str() {
                    "early" => DependentTrigger::AtStart,
                    "late" => DependentTrigger::AfterMainLoop,
                    _ => DependentTrigger::Auto,
                },
                ..LaunchOptions::default()
            };
            let qs = QuantizedWeights::from_parts(
                &spec,
                n,
                k,
                q.codes().to_vec(),
                q.scales().to_vec(),
                q.zeros().clone(),
            )?;
            let dws: Vec<_> = (0..copies)
                .map(|_| gemm.upload(&qs))
                .collect::<Result<_, _>>()?;
            for &m in &parse_list::<usize>(&args.ms) {
                let mut choices: Vec<usize> = parse_list(&args.splits);
                if args.no_split {
                    choices.push(1);
                }
                for (&forced, &sk) in choices
                    .iter()
                    .flat_map(|f| sk_modes.iter().map(move |s| (f, s)))
                {
                    let launcher = gemm.with(LaunchOptions {
                        split_k: NonZeroUsize::new(forced).map_or(SplitK::Auto, SplitK::Fixed),
                        stream_k: sk.and_then(NonZeroUsize::new),
                        ..base_options
                    });
                    launcher.reserve(m, n, k)?;
                    let a_host = random_matrix(m, k, (si as u64 + 1) << 48, false);
                    let a = stream.clone_htod(&to_elements::<f16>(&a_host))?;
                    let mut c = stream.alloc_zeros::<f16>(m * n)?;
                    let us = replay(&stream, 20, copies, 15, |i| {
                        Ok(launcher.run(&a, m, &dws[i], None, &mut c)?)
                    })?
                    .median();
                    let floor = (wbytes + 2 * m * k + 2 * m * n) as f64 / bw * 1e6;
                    let plan = launcher.plan(m, n, k);
                    let (t, splits) = (plan.tile, plan.splits);
                    let reduce = match (plan.stream_k, plan.reduction) {
                        (Some(g), _) => format!("sk{g}"),
                        (None, KReduction::None) => String::new(),
                        (None, KReduction::Cluster) => "cluster".into(),
                        (None, KReduction::Atomic) => "atomic".into(),
                        (None, KReduction::Ordered) => "global".into(),
                    };
                    println!(
                        "{n:>6}x{k:<6} M={m:<5} {t} splits={splits:<2} {reduce:<7} {us:8.2} us  floor {floor:6.2} us  {:5.1}% of floor",
                        floor / us * 100.0
                    );
                }
            }
        }
    }
    Ok(())
}

//! Launch settings: one value, set on a [`Gemm`](super::Gemm) or passed for one launch.

use std::num::NonZeroUsize;

/// How a launch splits K across CTAs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SplitK {
    /// The runtime's rule ([`choose_splits`](super::plan::choose_splits)): enough splits to fill
    /// one wave of the GPU.
    #[default]
    Auto,
    /// No split: every row of C is reduced over K in the same order whatever M is (with one declared
    /// tile, results are batch-invariant).
    Off,
    /// This many splits, clamped to 64 and to the number of `block_k` steps of K: results that do not
    /// depend on the GPU's size (with [`Reduction::Deterministic`]).
    Fixed(NonZeroUsize),
}

/// How the K splits of an output tile are summed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Reduction {
    /// In split order, in f32, through the split-K workspace or a thread-block cluster: the same
    /// inputs give the same bits on the same GPU, and a result that fits C is never `inf`.
    #[default]
    Deterministic,
    /// Each split adds its outputs into C with f16 atomics, where the tile can (the `wgmma` tiles
    /// that stage C in shared memory, and the 8-row tile where its launch has more CTAs than SMs on
    /// compute capability 9.x; f16 C, no bias or epilogue): no split waits for another's partial,
    /// but the last bits of C vary from launch to launch, each split adds two f16 roundings, and a
    /// split's partial beyond the f16 range makes its outputs `inf` even where the sum would fit.
    /// Like vLLM's `use_atomic_add`: for callers who know their partial sums stay within f16.
    AtomicF16,
}

/// Where a launch that uses programmatic dependent launch lets the next kernel of the stream start.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum DependentTrigger {
    /// At the start of every CTA for tiles of at most 16 rows of which two CTAs fit per SM, when the
    /// launch has more CTAs than the GPU has SMs; else after every CTA's main loop.
    #[default]
    Auto,
    /// At the start of every CTA: the next kernel's CTAs take free slots and stream their first
    /// weights while this kernel runs.
    AtStart,
    /// After every CTA's main loop: the next kernel cannot take DRAM bandwidth from this one.
    AfterMainLoop,
}

/// The settings of a launch. `Default` is the runtime's choice for every one of them.
///
/// ```
/// use humming_runtime::cuda::{LaunchOptions, Reduction, SplitK};
/// let fast = LaunchOptions {
///     reduction: Reduction::AtomicF16,
///     ..LaunchOptions::default()
/// };
/// let batch_invariant = LaunchOptions { split_k: SplitK::Off, ..LaunchOptions::default() };
/// # let _ = (fast, batch_invariant);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LaunchOptions {
    /// K splits ([`SplitK`]).
    pub split_k: SplitK,
    /// Stream-K for the `mma.sync` tiles of at most 16 rows per warp: `Some(g)` launches a 1-D grid
    /// of `g` CTAs (clamped to 2..=64 per SM and to the launch's output tiles x `block_k` steps) that
    /// take equal ranges of those steps (Osama et al., "Stream-K", PPoPP 2023); the CTAs that meet in
    /// a tile are its K splits, summed in K order. Applies with [`SplitK::Auto`] only; other tiles,
    /// launches of more than 65535 row tiles and shapes whose step counts overflow the kernel's
    /// integers ignore it ([`LaunchPlan::stream_k`](super::LaunchPlan::stream_k) says).
    pub stream_k: Option<NonZeroUsize>,
    /// How K splits are summed ([`Reduction`]).
    pub reduction: Reduction,
    /// Sum the 2 to 8 K splits of a staged `wgmma` tile of one CTA per SM in a thread-block cluster
    /// (distributed shared memory) where every cluster of the launch fits the GPU at once, instead
    /// of through the global workspace (same bits either way).
    pub cluster_reduction: bool,
    /// Programmatic dependent launch on compute capability 9.0 and newer (ignored elsewhere): a launch
    /// may start while the kernel before it on the stream ends, streams its first weights, and waits
    /// for that kernel before it reads A, C or the workspace. Not for tiles of which more than two
    /// CTAs fit per SM. Results are those of launches in sequence.
    pub programmatic_launch: bool,
    /// Where this launch lets the next one start ([`DependentTrigger`]).
    pub dependent_trigger: DependentTrigger,
}

impl Default for LaunchOptions {
    fn default() -> Self {
        LaunchOptions {
            split_k: SplitK::Auto,
            stream_k: None,
            reduction: Reduction::Deterministic,
            cluster_reduction: true,
            programmatic_launch: true,
            dependent_trigger: DependentTrigger::Auto,
        }
    }
}

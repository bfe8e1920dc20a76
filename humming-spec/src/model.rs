//! The kernel model: one plain-data value describes a quantized GEMM completely.
//!
//! Shapes follow the usual GEMM terms: `C[M, N] = A[M, K] · Bᵀ` where A (activations) is row-major
//! `[M, K]`, B (weights) is `[N, K]` (output features × input features, as stored by PyTorch, GPTQ's
//! dequantized form and GGUF), and C (output) is row-major `[M, N]`. M is a run-time value; N and K are
//! given at launch and checked against the kernel's rules.

use crate::dtype::DType;
use std::fmt;

/// How weight scales are shared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScaleGranularity {
    /// One scale per output channel (column of C): `[N]`.
    Channel,
    /// One scale per output channel and per group of `size` consecutive K (GPTQ/AWQ/GGUF style):
    /// `[ceil(K / size), N]`. `size` is a power of two.
    Group {
        /// Group size along K.
        size: u32,
    },
    /// One scale per `n × k` block of B (DeepSeek-V3 FP8 style), f32; the weights hold them
    /// `[ceil(K / k), ceil(N / n)]`.
    Block {
        /// Block extent along N.
        n: u32,
        /// Block extent along K.
        k: u32,
    },
    /// One scale for the whole tensor, f32.
    Tensor,
}

/// A weight scale: its element type and granularity.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Scale {
    /// Element type of the stored scales.
    pub dtype: DType,
    /// How scales are shared.
    pub granularity: ScaleGranularity,
}

/// Zero point of integer weights.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ZeroPoint {
    /// No zero point: `w = s · q` where `q` is the code's value (two's complement for `iN`).
    None,
    /// Integer zero point per scale group (GPTQ/AWQ asymmetric): `w = s · (q - z)` with `q`, `z`
    /// unsigned codes of the weight's width.
    Integer,
    /// Floating additive offset per scale group (GGUF `Q4_1`'s `m`): `w = s · q + m`, with `m` stored in
    /// the scale's dtype.
    FloatOffset,
}

/// Where rows of A and C come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Layout {
    /// Plain GEMM.
    Dense,
    /// Mixture-of-experts, vLLM `fused_moe` style: per-expert sorted slot ids in blocks of block M,
    /// one expert per block; slot `i` reads row `i / top_k` of A and writes row `i` of C.
    MoeIndexed,
    /// Mixture-of-experts, DeepGEMM "contiguous": expert `e` owns rows `offsets[e]..offsets[e + 1]`.
    MoeGroupedContiguous,
    /// Mixture-of-experts, DeepGEMM "masked": A is `[E, max_m, K]`, expert `e` owns its first
    /// `counts[e]` rows.
    MoeGroupedMasked,
}

impl Layout {
    /// Canonical spelling.
    pub const fn name(self) -> &'static str {
        match self {
            Layout::Dense => "dense",
            Layout::MoeIndexed => "moe_indexed",
            Layout::MoeGroupedContiguous => "moe_grouped_contiguous",
            Layout::MoeGroupedMasked => "moe_grouped_masked",
        }
    }

    /// A mixture-of-experts layout (weights of E experts, rows routed to them).
    pub const fn is_moe(self) -> bool {
        !matches!(self, Layout::Dense)
    }
}

/// A function fused into the epilogue, applied to `C` after scales and bias, in f32.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Epilogue {
    /// Identity.
    None,
    /// `max(x, 0)`.
    Relu,
    /// `x · sigmoid(x)` (SiLU / swish).
    Silu,
    /// `0.5 · x · (1 + erf(x / √2))`.
    Gelu,
    /// The tanh approximation of GELU.
    GeluTanh,
    /// SiLU-GLU of a fused gate-up projection: `C[:, j] = silu(gate_j) · up_j`, C has N / 2 columns.
    /// The weights' rows are the gates `0..N/2` then the up projections `N/2..N` (vLLM's `w13`).
    SiluGlu,
    /// As [`Epilogue::SiluGlu`], with the weights' rows interleaved: gate `j` is row `2j`, up `j` row
    /// `2j + 1`.
    SiluGluInterleaved,
}

impl Epilogue {
    /// Canonical spelling.
    pub const fn name(self) -> &'static str {
        match self {
            Epilogue::None => "none",
            Epilogue::Relu => "relu",
            Epilogue::Silu => "silu",
            Epilogue::Gelu => "gelu",
            Epilogue::GeluTanh => "gelu_tanh",
            Epilogue::SiluGlu => "silu_glu",
            Epilogue::SiluGluInterleaved => "silu_glu_interleaved",
        }
    }

    /// A gated epilogue: C has half the weights' output channels.
    pub const fn is_glu(self) -> bool {
        matches!(self, Epilogue::SiluGlu | Epilogue::SiluGluInterleaved)
    }
}

/// A GPU architecture the kernel is compiled for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Arch {
    /// Turing.
    Sm75,
    /// A100.
    Sm80,
    /// Consumer Ampere.
    Sm86,
    /// Ada.
    Sm89,
    /// Hopper without the arch-specific features.
    Sm90,
    /// Hopper with `wgmma` / `setmaxnreg` (H100, H200).
    Sm90a,
    /// Blackwell data centre.
    Sm100a,
    /// Blackwell consumer.
    Sm120a,
}

impl Arch {
    /// Every arch, in order.
    pub const ALL: [Arch; 8] = [
        Arch::Sm75,
        Arch::Sm80,
        Arch::Sm86,
        Arch::Sm89,
        Arch::Sm90,
        Arch::Sm90a,
        Arch::Sm100a,
        Arch::Sm120a,
    ];

    /// Canonical spelling, e.g. `sm_90a`.
    pub const fn name(self) -> &'static str {
        match self {
            Arch::Sm75 => "sm_75",
            Arch::Sm80 => "sm_80",
            Arch::Sm86 => "sm_86",
            Arch::Sm89 => "sm_89",
            Arch::Sm90 => "sm_90",
            Arch::Sm90a => "sm_90a",
            Arch::Sm100a => "sm_100a",
            Arch::Sm120a => "sm_120a",
        }
    }

    /// Compute capability as `major * 10 + minor`.
    pub const fn capability(self) -> u32 {
        match self {
            Arch::Sm75 => 75,
            Arch::Sm80 => 80,
            Arch::Sm86 => 86,
            Arch::Sm89 => 89,
            Arch::Sm90 | Arch::Sm90a => 90,
            Arch::Sm100a => 100,
            Arch::Sm120a => 120,
        }
    }

    /// Parses `sm_80`, `sm_90a`, ...
    pub fn parse(s: &str) -> Option<Arch> {
        Arch::ALL.into_iter().find(|a| a.name() == s)
    }

    pub(crate) const fn bit(self) -> u16 {
        1 << self as u16
    }
}

/// A set of [`Arch`]es, kept as a bit set so that the descriptor stays `Copy` and `const`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct ArchSet(pub u16);

impl ArchSet {
    /// The default targets: `sm_80` and `sm_90a`.
    pub const DEFAULT: ArchSet = ArchSet(Arch::Sm80.bit() | Arch::Sm90a.bit());

    /// Adds an arch; returns false if it was present.
    pub fn insert(&mut self, a: Arch) -> bool {
        let had = self.contains(a);
        self.0 |= a.bit();
        !had
    }

    /// Membership.
    pub const fn contains(self, a: Arch) -> bool {
        self.0 & a.bit() != 0
    }

    /// The archs in ascending order.
    pub fn iter(self) -> impl Iterator<Item = Arch> {
        Arch::ALL.into_iter().filter(move |a| self.contains(*a))
    }

    /// True if no arch is set.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The lowest arch, if any.
    pub fn min(self) -> Option<Arch> {
        self.iter().next()
    }
}

/// The tensor-core instruction a tile configuration is built on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Mma {
    /// `mma.sync.m16n8k16`, one warp at a time (sm_80 and newer).
    #[default]
    Sync,
    /// Hopper `wgmma.mma_async` (sm_90a only): a warpgroup of four warps multiplies its 4 x `warp_n`
    /// (64, 32 or 16) dequantized weight channels, held in registers (the A operand, "swap AB"), by the
    /// tile's rows of activations read from shared memory (the B operand, 128-byte swizzled, K-major).
    /// The design of Humming's Hopper path (anchor study, section 5).
    Wgmma,
    /// Hopper `wgmma.mma_async` with both operands in shared memory (sm_90a only), in the persistent,
    /// warp-specialized kernel: about one CTA per SM walks the launch's output tiles; a producer
    /// warpgroup loads the K-major weight codes and the rows of A by TMA, and two consumer
    /// warpgroups each multiply `warp_n` (64 or 128) of the tile's `block_n` channels by its `block_m`
    /// rows, 128 codes per stage. For 8-bit codes on both operands (W8A8 FP8), whose weights it reads
    /// in their own packed layout (`humming_spec::layout::WeightLayout::KMajor`).
    WgmmaSs,
}

impl Mma {
    /// The name used in `tile(..., mma = ...)` and in the canonical text.
    pub const fn name(self) -> &'static str {
        match self {
            Mma::Sync => "sync",
            Mma::Wgmma => "wgmma",
            Mma::WgmmaSs => "wgmma_ss",
        }
    }
}

/// One tile configuration of the tensor-core kernel.
///
/// A CTA computes a `block_m × block_n` tile of C, walking K in steps of `block_k`; each warp owns a
/// `warp_m × warp_n × warp_k` sub-tile (warps along K are reduced through shared memory). `stages` is
/// the depth of the `cp.async` shared-memory pipeline. With [`Mma::Wgmma`] the four warps along N
/// (`block_n = 4 * warp_n`, `warp_n` 64, 32 or 16, `warp_m = block_m`) form one warpgroup per 64 of
/// `block_k`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TileConfig {
    /// CTA tile rows (tokens).
    pub block_m: u16,
    /// CTA tile columns (output channels).
    pub block_n: u16,
    /// CTA tile depth per pipeline stage.
    pub block_k: u16,
    /// Warp tile rows.
    pub warp_m: u16,
    /// Warp tile columns.
    pub warp_n: u16,
    /// Warp tile depth.
    pub warp_k: u16,
    /// Shared-memory pipeline stages.
    pub stages: u8,
    /// Tensor-core instruction: [`Mma::Sync`] (the default) or [`Mma::Wgmma`], whose tiles follow their
    /// own rules (see the README's tile section).
    pub mma: Mma,
    /// CTAs per multiprocessor the kernel is compiled for (the `minBlocksPerMultiprocessor` of
    /// `__launch_bounds__`, which caps each thread at `65536 / (threads * ctas_per_sm)` registers);
    /// 0 (the default): the code generator's register model decides
    /// (`humming_spec::resources::min_blocks_per_sm`).
    pub ctas_per_sm: u8,
}

impl TileConfig {
    /// Threads per CTA: the compute warps, plus the producer warpgroup of
    /// [`producer_warpgroup`](Self::producer_warpgroup) tiles.
    pub const fn threads(&self) -> u32 {
        self.compute_threads()
            + if self.producer_warpgroup() {
                crate::abi::PRODUCER_THREADS
            } else {
                0
            }
    }

    /// Threads of the warps that multiply: one warp per `warp_m × warp_n × warp_k` sub-tile; with
    /// [`Mma::WgmmaSs`] two consumer warpgroups, on one tile (`warp_n = block_n / 2`, cooperative) or
    /// taking turns on tiles of their own (`warp_n = block_n`, ping-pong).
    pub const fn compute_threads(&self) -> u32 {
        if matches!(self.mma, Mma::WgmmaSs) {
            return 2 * 128;
        }
        (self.block_m / self.warp_m) as u32
            * (self.block_n / self.warp_n) as u32
            * (self.block_k / self.warp_k) as u32
            * 32
    }

    /// Whether the CTA has a producer warpgroup after the compute warps: its first thread issues
    /// every copy of the shared-memory stage ring, so that no compute warp issues a copy or waits for
    /// a stage's release, and it hands its registers to the compute warps (`setmaxnreg`; warp
    /// specialisation as in Humming's and CUTLASS's Hopper kernels). `wgmma` tiles of at most 8
    /// compute warps, except those declared for two or more CTAs per SM: in those the 128 extra
    /// threads would cut the compute warps' registers (e.g. 16 compute warps: 112 with the
    /// warpgroup against 128 without).
    pub const fn producer_warpgroup(&self) -> bool {
        matches!(self.mma, Mma::WgmmaSs)
            || (matches!(self.mma, Mma::Wgmma)
                && self.ctas_per_sm < 2
                && self.compute_threads() <= 256)
    }

    /// Whether the tile runs the persistent kernel ([`Mma::WgmmaSs`]).
    pub const fn persistent(&self) -> bool {
        matches!(self.mma, Mma::WgmmaSs)
    }

    /// Whether a persistent tile's two consumer warpgroups take turns on tiles of their own
    /// (`warp_n = block_n`) instead of sharing each tile.
    pub const fn ping_pong(&self) -> bool {
        self.persistent() && self.warp_n == self.block_n
    }
}

impl fmt::Display for TileConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "b{}x{}x{}w{}x{}x{}s{}",
            self.block_m,
            self.block_n,
            self.block_k,
            self.warp_m,
            self.warp_n,
            self.warp_k,
            self.stages
        )?;
        // mma.sync tiles keep the text (and the kernel hashes) they had before wgmma tiles existed,
        // and every tile without `ctas_per_sm` the text it had before that.
        if self.mma != Mma::Sync {
            write!(f, "{}", self.mma.name())?;
        }
        if self.ctas_per_sm != 0 {
            write!(f, "c{}", self.ctas_per_sm)?;
        }
        Ok(())
    }
}

/// Maximum number of tile configurations per kernel.
pub const MAX_TILES: usize = 8;

/// A fixed-capacity list of tile configurations (plain data, `Copy`, usable in `const`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TileList {
    /// Number of valid entries.
    pub len: u8,
    /// Entries; those past `len` are ignored (and zeroed in canonical values).
    pub items: [TileConfig; MAX_TILES],
}

impl TileList {
    const ZERO: TileConfig = TileConfig {
        block_m: 0,
        block_n: 0,
        block_k: 0,
        warp_m: 0,
        warp_n: 0,
        warp_k: 0,
        stages: 0,
        mma: Mma::Sync,
        ctas_per_sm: 0,
    };
    /// No configuration: the generator picks its defaults.
    pub const EMPTY: TileList = TileList {
        len: 0,
        items: [Self::ZERO; MAX_TILES],
    };

    /// The valid entries.
    pub fn as_slice(&self) -> &[TileConfig] {
        &self.items[..self.len as usize]
    }

    /// Appends; returns false when full.
    pub fn push(&mut self, t: TileConfig) -> bool {
        if (self.len as usize) < MAX_TILES {
            self.items[self.len as usize] = t;
            self.len += 1;
            true
        } else {
            false
        }
    }
}

/// The complete, canonical description of one quantized GEMM kernel.
///
/// Two specs that mean the same thing compare equal and have the same [`KernelSpec::hash`], whatever
/// spelling or field order the declaration used. Build it with the `gemm!` macro (which validates it at
/// compile time, with spans), or with [`crate::parse_kernel_str`] / [`crate::validate`] at run time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KernelSpec {
    /// Activation (A) element type.
    pub a: DType,
    /// Weight (B) element type.
    pub b: DType,
    /// Output (C) element type.
    pub c: DType,
    /// Primary weight scale.
    pub scale: Scale,
    /// Secondary weight scale: per channel or per tensor (multiplied in the epilogue), or per
    /// super-group over integer sub-group scales (GGUF K-quants' `d`).
    pub scale2: Option<Scale>,
    /// Zero point.
    pub zero_point: ZeroPoint,
    /// Whether a per-output-channel bias `[N]` (in C's dtype) is added.
    pub bias: bool,
    /// Row layout.
    pub layout: Layout,
    /// Function fused into the epilogue.
    pub epilogue: Epilogue,
    /// Compilation targets.
    pub archs: ArchSet,
    /// Fixed tile configurations; empty means "the generator's defaults".
    pub tiles: TileList,
}

impl KernelSpec {
    /// Whether weights quantized (and packed) for `other` fit a kernel of this spec: the same
    /// formats, scales, zero point, bias, layout and epilogue. The packed layout depends on nothing
    /// else, so the targets and the tiles may differ.
    pub fn takes_weights_of(&self, other: &KernelSpec) -> bool {
        KernelSpec {
            archs: other.archs,
            tiles: other.tiles,
            ..*self
        } == *other
    }

    /// The canonical text of the descriptor. It is the input of [`KernelSpec::hash`], and a readable
    /// one-line summary: `humming.gemm.v1 a=f16 b=u4 c=f16 scale=group128:f16 ...`.
    pub fn canonical(&self) -> String {
        let scale = |s: &Scale| match s.granularity {
            ScaleGranularity::Channel => format!("channel:{}", s.dtype),
            ScaleGranularity::Group { size } => format!("group{size}:{}", s.dtype),
            ScaleGranularity::Block { n, k } => format!("block{n}x{k}:{}", s.dtype),
            ScaleGranularity::Tensor => format!("tensor:{}", s.dtype),
        };
        let zp = match self.zero_point {
            ZeroPoint::None => "none",
            ZeroPoint::Integer => "int",
            ZeroPoint::FloatOffset => "float",
        };
        let archs: Vec<&str> = self.archs.iter().map(Arch::name).collect();
        let tiles: Vec<String> = self
            .tiles
            .as_slice()
            .iter()
            .map(|t| t.to_string())
            .collect();
        format!(
            "humming.gemm.v1 a={} b={} c={} scale={} scale2={} zero_point={} bias={} layout={} epilogue={} arch={} tiles={}",
            self.a,
            self.b,
            self.c,
            scale(&self.scale),
            self.scale2
                .as_ref()
                .map(scale)
                .unwrap_or_else(|| "none".into()),
            zp,
            self.bias,
            self.layout.name(),
            self.epilogue.name(),
            archs.join(","),
            if tiles.is_empty() {
                "default".to_string()
            } else {
                tiles.join(",")
            },
        )
    }

    /// SHA-256 of [`KernelSpec::canonical`].
    pub fn hash(&self) -> [u8; 32] {
        use sha2::Digest;
        sha2::Sha256::digest(self.canonical().as_bytes()).into()
    }

    /// The first 128 bits of the hash in lower-case hex: names the generated files
    /// (`<OUT_DIR>/humming/<hash_hex>.fatbin`).
    pub fn hash_hex(&self) -> String {
        hex(&self.hash()[..16])
    }

    /// Group size along K of the primary scale (`K` itself is not known here: channel scales give `None`).
    pub const fn group_size(&self) -> Option<u32> {
        match self.scale.granularity {
            ScaleGranularity::Group { size } => Some(size),
            _ => None,
        }
    }
}

impl fmt::Display for KernelSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.canonical())
    }
}

/// Lower-case hex of bytes.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

//! The kernels of the real-model examples (`smollm2`, `gemma3`), one per GGML type of their file: the
//! declaration check against the conversion, loading on the GPU, the lines that describe them, and
//! the kernel of a layer.

use super::timing::Res;
use cudarc::driver::CudaStream;
use humming::cuda::Gemm;
use humming::half::f16;
use humming::spec::KernelSpec;
use humming::{GemmKernel, Result};
use humming_import::{GgmlType, LinearLayer, check_declaration};
use std::sync::Arc;

/// The `gemm!` kernel that runs the tensors of one GGML type.
pub struct Kernel {
    pub ty: GgmlType,
    pub name: &'static str,
    pub spec: KernelSpec,
    /// `Gemm::load::<K>`.
    pub load: fn(&Arc<CudaStream>) -> Result<Gemm<f16, f16>>,
}

impl Kernel {
    /// The kernel `K` for tensors of type `ty`.
    pub const fn of<K: GemmKernel<A = f16, C = f16>>(ty: GgmlType) -> Kernel {
        Kernel {
            ty,
            name: K::NAME,
            spec: K::DESCRIPTOR,
            load: Gemm::load::<K>,
        }
    }
}

/// Checks that each kernel runs exactly what `humming_import::to_quantized` makes of its type.
pub fn check_declarations(kernels: &[Kernel]) -> Res<()> {
    for k in kernels {
        check_declaration(k.name, k.ty, &k.spec)?;
    }
    Ok(())
}

/// Whether one of `kernels` runs tensors of type `ty`.
pub fn has_kernel(kernels: &[Kernel], ty: GgmlType) -> bool {
    kernels.iter().any(|k| k.ty == ty)
}

/// The kernels on the GPU, all on one stream.
pub struct Kernels {
    pub stream: Arc<CudaStream>,
    /// One kernel per GGML type, in the order of the example's kernels.
    pub gemms: Vec<(GgmlType, Gemm<f16, f16>)>,
}

impl Kernels {
    /// Disables cudarc's event tracking (so everything must run on `stream`), prints the device
    /// and loads `kernels`, in order.
    pub fn load(stream: Arc<CudaStream>, kernels: &[Kernel]) -> Res<Kernels> {
        let ctx = stream.context().clone();
        // SAFETY: everything runs on this one stream, so the per-buffer events that cudarc records
        // to order work across streams are not needed; without them a launch costs fewer driver
        // calls.
        unsafe { ctx.disable_event_tracking() };
        let (major, minor) = ctx.compute_capability()?;
        println!(
            "GPU: {} (sm_{major}{minor}, {:.0} GiB)",
            ctx.name()?,
            ctx.total_mem()? as f64 / (1u64 << 30) as f64
        );
        let mut gemms = Vec::with_capacity(kernels.len());
        for k in kernels {
            gemms.push((k.ty, (k.load)(&stream)?));
        }
        Ok(Kernels { stream, gemms })
    }

    /// The kernel of a layer's type.
    pub fn gemm(&self, l: &LinearLayer) -> &Gemm<f16, f16> {
        let found = self.gemms.iter().find(|(ty, _)| *ty == l.ggml_type);
        &found.expect("a kernel for every type (checked on load)").1
    }
}

/// Prints a kernel: its name (and GGML type), spec and module source, and the tiles it launches at
/// each M of `ms` for an `n` x `k` layer (`of`: which one).
pub fn print_kernel(
    g: &Gemm<f16, f16>,
    ty: Option<GgmlType>,
    of: &str,
    ms: &[usize],
    (n, k): (usize, usize),
) {
    let tiles: Vec<String> = ms
        .iter()
        .map(|&m| format!("M={m}: {}", g.plan(m, n, k).tile))
        .collect();
    let ty = ty.map(|ty| format!(" ({ty})")).unwrap_or_default();
    println!(
        "kernel {}{ty} `{}` loaded from {:?}; tiles (of {of}) {}",
        g.name(),
        g.spec(),
        g.module_source(),
        tiles.join(", "),
    );
}

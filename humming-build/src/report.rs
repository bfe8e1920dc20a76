//! What a build did: each kernel's outcome, the whole report, and the errors it fails with.

use crate::Job;
use humming_spec::Arch;
use std::fmt;
use std::io;
use std::path::PathBuf;

/// What happened to one kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelStatus {
    /// Compiled by NVCC in this build.
    Compiled,
    /// Copied from the NVCC cache.
    CacheHit,
    /// `$OUT_DIR` already held the fatbin of the same cache key.
    UpToDate,
    /// An empty fatbin was written (no NVCC, or no arch left); the runtime compiles with NVRTC.
    Placeholder,
}

/// One distinct kernel of a [`Report`].
#[derive(Clone, Debug)]
pub struct KernelReport {
    /// `KernelSpec::hash_hex`, the stem of its files.
    pub hash: String,
    /// The names it is declared under.
    pub names: Vec<String>,
    /// The file of its first declaration.
    pub file: PathBuf,
    /// The archs compiled (after restrictions).
    pub archs: Vec<Arch>,
    /// What happened.
    pub status: KernelStatus,
    /// Seconds spent on it (NVCC time, or copy time for a cache hit).
    pub seconds: f64,
}

/// What a build did; also written to `$OUT_DIR/humming/build-report.txt`.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// The output folder, `$OUT_DIR/humming`.
    pub out_dir: PathBuf,
    /// Files read by the scanner.
    pub files_scanned: usize,
    /// Files that could not be read or parsed (skipped).
    pub files_skipped: Vec<PathBuf>,
    /// Valid kernel declarations found (before deduplication).
    pub declarations: usize,
    /// Declarations that do not parse or validate (left to the macro to report).
    pub invalid_declarations: usize,
    /// Distinct kernels.
    pub kernels_found: usize,
    /// Kernels compiled by NVCC.
    pub compiled: usize,
    /// Kernels copied from the cache.
    pub cache_hits: usize,
    /// Kernels already in place.
    pub up_to_date: usize,
    /// Kernels given an empty placeholder fatbin.
    pub placeholders: usize,
    /// The NVCC used, if any.
    pub nvcc: Option<PathBuf>,
    /// The release line of `nvcc --version`.
    pub nvcc_version: Option<String>,
    /// Wall time of the whole build step, in seconds.
    pub seconds: f64,
    /// Every distinct kernel.
    pub kernels: Vec<KernelReport>,
}

impl Report {
    pub(crate) fn push(&mut self, job: &Job, status: KernelStatus, seconds: f64) {
        match status {
            KernelStatus::Compiled => self.compiled += 1,
            KernelStatus::CacheHit => self.cache_hits += 1,
            KernelStatus::UpToDate => self.up_to_date += 1,
            KernelStatus::Placeholder => self.placeholders += 1,
        }
        self.kernels.push(KernelReport {
            hash: job.hash.clone(),
            names: job.names.clone(),
            file: job.file.clone(),
            archs: job.archs.iter().collect(),
            status,
            seconds,
        });
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "humming build report")?;
        writeln!(f, "files scanned: {}", self.files_scanned)?;
        writeln!(
            f,
            "files skipped (not valid Rust): {}",
            self.files_skipped.len()
        )?;
        for p in &self.files_skipped {
            writeln!(f, "  {}", p.display())?;
        }
        writeln!(
            f,
            "kernel declarations: {} valid, {} invalid",
            self.declarations, self.invalid_declarations
        )?;
        writeln!(f, "kernels found: {}", self.kernels_found)?;
        writeln!(f, "compiled: {}", self.compiled)?;
        writeln!(f, "cache hits: {}", self.cache_hits)?;
        writeln!(f, "up to date: {}", self.up_to_date)?;
        writeln!(
            f,
            "placeholders (compiled at run time by NVRTC): {}",
            self.placeholders
        )?;
        match (&self.nvcc, &self.nvcc_version) {
            (Some(p), Some(v)) => writeln!(f, "nvcc: {} ({v})", p.display())?,
            (Some(p), None) => writeln!(f, "nvcc: {}", p.display())?,
            _ => writeln!(f, "nvcc: none")?,
        }
        writeln!(f, "seconds: {:.3}", self.seconds)?;
        if !self.kernels.is_empty() {
            writeln!(f, "kernels:")?;
        }
        for k in &self.kernels {
            let archs: Vec<&str> = k.archs.iter().map(|a| a.name()).collect();
            writeln!(
                f,
                "  {} {:<11} {:>8.3} s  [{}]  {}  ({})",
                k.hash,
                format!("{:?}", k.status),
                k.seconds,
                archs.join(","),
                k.names.join(", "),
                k.file.display()
            )?;
        }
        Ok(())
    }
}

/// An NVCC run that failed.
#[derive(Clone, Debug)]
pub struct NvccFailure {
    /// The kernel names.
    pub kernels: Vec<String>,
    /// The file of the first declaration.
    pub file: PathBuf,
    /// The generated source that failed.
    pub cu: PathBuf,
    /// The command line, runnable in a shell.
    pub command: String,
    /// The exit status, or why NVCC did not run.
    pub status: String,
    /// NVCC's complete output (standard error, then standard output).
    pub output: String,
}

impl NvccFailure {
    pub(crate) fn new(job: &Job, command: String, status: &str, output: &str) -> Box<NvccFailure> {
        Box::new(NvccFailure {
            kernels: job.names.clone(),
            file: job.file.clone(),
            cu: job.cu.clone(),
            command,
            status: status.to_string(),
            output: output.to_string(),
        })
    }
}

impl fmt::Display for NvccFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "NVCC failed ({}) on kernel {} declared in {}",
            self.status,
            self.kernels.join("/"),
            self.file.display()
        )?;
        writeln!(f, "  source:  {}", self.cu.display())?;
        writeln!(f, "  command: {}", self.command)?;
        writeln!(f, "--- NVCC output ---")?;
        writeln!(f, "{}", self.output.trim_end())?;
        write!(f, "--- end of NVCC output ---")
    }
}

/// Why a build failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// `OUT_DIR` is not set: not running in a build script.
    #[error(
        "OUT_DIR is not set: humming_build::build() must be called from a Cargo build script (build.rs), \
         or be given an output folder with Config::out_dir"
    )]
    NoOutDir,
    /// A file could not be written or a folder created.
    #[error("cannot write {}: {source}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// `HUMMING_CUDA_ARCHS` is not an arch list.
    #[error("HUMMING_CUDA_ARCHS={value:?} is invalid: {message}")]
    BadArchs {
        /// The variable's value.
        value: String,
        /// What is wrong.
        message: String,
    },
    /// NVCC is required but missing or unusable.
    #[error("{0}")]
    NvccMissing(String),
    /// One or more NVCC runs failed.
    #[error("{}", failures_text(.0))]
    NvccFailed(Vec<NvccFailure>),
}

fn failures_text(failures: &[NvccFailure]) -> String {
    failures
        .iter()
        .map(|f| f.to_string())
        .collect::<Vec<_>>()
        .join("\n\n")
}

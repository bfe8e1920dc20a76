//! Build-script helper of humming: finds every `gemm!` kernel in a crate, writes its CUDA source and
//! compiles it ahead of time with NVCC into a fatbin that the `gemm!` macro embeds with
//! `include_bytes!`.
//!
//! # Use
//!
//! Add `humming-build` to `[build-dependencies]` and call it from `build.rs`:
//!
//! ```no_run
//! // build.rs
//! fn main() {
//!     humming_build::build();
//! }
//! ```
//!
//! or, with options, through [`Config`]:
//!
//! ```no_run
//! // build.rs
//! fn main() {
//!     humming_build::Config::new()
//!         .file("src/generated/kernels.rs") // an extra root file, with its module tree
//!         .flag("-lineinfo") // an extra NVCC flag (part of the cache key)
//!         .build();
//! }
//! ```
//!
//! # What it does
//!
//! 1. Finds every `gemm!` invocation (any macro path ending in `gemm`) by walking the module tree
//!    from `src/lib.rs`, `src/main.rs` and `src/bin/`, and reading every `.rs` file under `tests/`,
//!    `examples/` and `benches/` (see [`scan`]). Declarations that do not parse or validate, and files
//!    that are not valid Rust, are skipped: the macro reports those errors with spans.
//! 2. For each distinct kernel (by [`KernelSpec::hash_hex`](humming_spec::KernelSpec::hash_hex)) writes
//!    `$OUT_DIR/humming/<hash>.cu` and the headers of [`humming_spec::codegen::headers`] under
//!    `$OUT_DIR/humming/include/`.
//! 3. Compiles each kernel with NVCC to `$OUT_DIR/humming/<hash>.fatbin`, keeping the ptxas report in
//!    `<hash>.ptxas.log`: `-std=c++17 -O3 -fatbin --ptxas-options=-v -I include` (NVCC runs in
//!    `$OUT_DIR/humming`, so the flags do not depend on where `target/` is) and one
//!    `-gencode=arch=compute_XX,code=sm_XX` per arch of the declaration. Up to `NUM_JOBS` NVCCs run at
//!    once.
//! 4. Caches every fatbin outside `target/`, by a SHA-256 of the source, the headers, the generator
//!    version, the exact `nvcc --version` output and the flags (see [`cache`]), so a clean build or
//!    another profile copies fatbins instead of compiling them again.
//! 5. Writes `$OUT_DIR/humming/build-report.txt`: kernels found, compiled, cache hits, seconds.
//!
//! Without NVCC the build still succeeds: it prints one `cargo:warning` and writes an empty fatbin per
//! kernel; the runtime then compiles the kernel's source with NVRTC when it is first used.
//!
//! # Environment
//!
//! | variable | effect |
//! |---|---|
//! | `NVCC` | the NVCC to use (a path, or a program name looked up on `PATH`) |
//! | `CUDA_HOME`, `CUDA_PATH` | toolkit roots: `<root>/bin/nvcc` (after `NVCC`, before `PATH`, then `/usr/local/cuda/bin/nvcc`) |
//! | `HUMMING_CUDA_ARCHS` | comma list such as `sm_90a` or `sm_80,sm_90a`: compile only these archs (intersected with each declaration's `arch`) |
//! | `HUMMING_REQUIRE_NVCC` | `1`/`true`: a missing NVCC fails the build; `0`/`false`: it never does, even on CI |
//! | `CI` | `true`/`1`: a missing NVCC fails the build (unless `HUMMING_REQUIRE_NVCC=0`) |
//! | `HUMMING_CACHE_DIR` | the cache root (default `$XDG_CACHE_HOME/humming`, else `$HOME/.cache/humming`); fatbins go in its `nvcc/` folder |
//! | `PATH` | searched for `nvcc`; watched only when `NVCC`, `CUDA_HOME` and `CUDA_PATH` did not decide |
//! | `NUM_JOBS` | set by Cargo: how many NVCCs run at once |
//!
//! The humming repository's `scripts/install-cuda-toolchain.sh` installs a pinned NVCC 13.0 from PyPI
//! wheels (no GPU or system CUDA needed) and prints the `CUDA_HOME` to export.

#![warn(missing_docs)]
// The examples are build scripts, whose `fn main` is the point.
#![allow(clippy::needless_doctest_main)]

pub mod cache;
pub mod nvcc;
mod report;
pub mod scan;

pub use report::{Error, KernelReport, KernelStatus, NvccFailure, Report};

use humming_spec::codegen::{GENERATOR_VERSION, headers};
use humming_spec::{Arch, ArchSet, KernelSpec};
use std::collections::HashMap;
use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

/// Environment variables whose change reruns the build script (`PATH` is added when it decides which
/// NVCC is used).
pub const WATCHED_ENV: [&str; 8] = [
    "NVCC",
    "HUMMING_TOOLCHAIN_DIR",
    "CUDA_HOME",
    "CUDA_PATH",
    "HUMMING_CUDA_ARCHS",
    "HUMMING_REQUIRE_NVCC",
    "HUMMING_CACHE_DIR",
    "CI",
];

/// Finds and compiles every `gemm!` kernel of the crate whose build script calls it, with the default
/// [`Config`]. Fails the build (panics with the message) on an NVCC error, or when NVCC is required
/// but missing; see the [crate documentation](crate) for details.
///
/// ```no_run
/// // build.rs
/// fn main() {
///     humming_build::build();
/// }
/// ```
pub fn build() -> Report {
    Config::new().build()
}

/// Options of a build. Every option has a default that suits a plain `build.rs`.
#[derive(Clone, Debug, Default)]
pub struct Config {
    root: Option<PathBuf>,
    out_dir: Option<PathBuf>,
    files: Vec<PathBuf>,
    exclude: Vec<PathBuf>,
    nvcc: Option<PathBuf>,
    flags: Vec<String>,
    archs: Option<ArchSet>,
    require_nvcc: Option<bool>,
    cache_dir: Option<PathBuf>,
    no_cache: bool,
    jobs: Option<usize>,
}

impl Config {
    /// The defaults: scan the crate at `$CARGO_MANIFEST_DIR`, write to `$OUT_DIR/humming`.
    pub fn new() -> Config {
        Config::default()
    }

    /// The crate folder to scan (default `$CARGO_MANIFEST_DIR`, else the current folder).
    pub fn root(mut self, dir: impl Into<PathBuf>) -> Config {
        self.root = Some(dir.into());
        self
    }

    /// The output folder (default `$OUT_DIR`); files go in its `humming/` subfolder.
    pub fn out_dir(mut self, dir: impl Into<PathBuf>) -> Config {
        self.out_dir = Some(dir.into());
        self
    }

    /// Also scans this file (relative to the root) and its module tree, e.g. a file that a `#[path]`
    /// outside the module tree or a `include!` pulls in.
    pub fn file(mut self, path: impl Into<PathBuf>) -> Config {
        self.files.push(path.into());
        self
    }

    /// Does not scan the files under this path (a file or folder, relative to the root), e.g.
    /// `tests/ui`, whose trybuild cases are compiled as crates of their own without this build script,
    /// so their kernels would be compiled for nothing.
    pub fn exclude(mut self, path: impl Into<PathBuf>) -> Config {
        self.exclude.push(path.into());
        self
    }

    /// Uses this NVCC instead of looking for one.
    pub fn nvcc(mut self, path: impl Into<PathBuf>) -> Config {
        self.nvcc = Some(path.into());
        self
    }

    /// Adds an NVCC flag, after the default ones (e.g. `-lineinfo`). Flags are part of the cache key.
    pub fn flag(mut self, flag: impl Into<String>) -> Config {
        self.flags.push(flag.into());
        self
    }

    /// Compiles only these archs (intersected with each declaration's archs, and with
    /// `HUMMING_CUDA_ARCHS` when set).
    pub fn archs(mut self, archs: impl IntoIterator<Item = Arch>) -> Config {
        let mut set = ArchSet::default();
        for a in archs {
            set.insert(a);
        }
        self.archs = Some(set);
        self
    }

    /// Whether a missing NVCC fails the build (default: `HUMMING_REQUIRE_NVCC`, else `CI`, else no).
    pub fn require_nvcc(mut self, require: bool) -> Config {
        self.require_nvcc = Some(require);
        self
    }

    /// The NVCC cache folder (default: `nvcc/` under `$HUMMING_CACHE_DIR`, `$XDG_CACHE_HOME/humming`
    /// or `$HOME/.cache/humming`).
    pub fn cache_dir(mut self, dir: impl Into<PathBuf>) -> Config {
        self.cache_dir = Some(dir.into());
        self
    }

    /// Turns the NVCC cache on (the default) or off.
    pub fn cache(mut self, enabled: bool) -> Config {
        self.no_cache = !enabled;
        self
    }

    /// How many NVCCs may run at once (default `$NUM_JOBS`, else the number of CPUs).
    pub fn jobs(mut self, jobs: usize) -> Config {
        self.jobs = Some(jobs.max(1));
        self
    }

    /// Runs the build and prints Cargo directives. Fails the build (panics with the error's message)
    /// on an error; see [`Config::try_build`] to handle errors yourself.
    pub fn build(&self) -> Report {
        match self.try_build() {
            Ok(report) => report,
            Err(e) => panic!("\n\nhumming-build: {e}\n"),
        }
    }

    /// Runs the build, prints Cargo directives on standard output, and returns what it did.
    pub fn try_build(&self) -> Result<Report, Error> {
        self.run(&|k| std::env::var_os(k), &mut |line| println!("{line}"))
    }

    /// The build, with the environment read through `env` and every output line (Cargo directives and
    /// progress) passed to `emit`.
    fn run(
        &self,
        env: &dyn Fn(&str) -> Option<OsString>,
        emit: &mut dyn FnMut(String),
    ) -> Result<Report, Error> {
        let start = Instant::now();
        let var = |k: &str| env(k).filter(|v| !v.is_empty());
        let out_dir = self
            .out_dir
            .clone()
            .or_else(|| var("OUT_DIR").map(PathBuf::from))
            .ok_or(Error::NoOutDir)?;
        let root = match self
            .root
            .clone()
            .or_else(|| var("CARGO_MANIFEST_DIR").map(PathBuf::from))
        {
            Some(r) => r,
            None => std::env::current_dir().map_err(|e| Error::Io {
                path: PathBuf::from("."),
                source: e,
            })?,
        };
        for key in WATCHED_ENV {
            emit(format!("cargo:rerun-if-env-changed={key}"));
        }

        // 1. Scan.
        let scanned = scan::scan_crate(&root, &self.files, &self.exclude);
        for dir in &scanned.dirs {
            emit(format!("cargo:rerun-if-changed={}", dir.display()));
        }
        for file in &scanned.files {
            emit(format!("cargo:rerun-if-changed={}", file.display()));
        }
        let mut report = Report {
            files_scanned: scanned.files.len(),
            files_skipped: scanned.skipped.clone(),
            declarations: scanned.kernels.len(),
            invalid_declarations: scanned.invalid,
            out_dir: out_dir.join("humming"),
            ..Report::default()
        };

        // 2. Restrict archs.
        let mut restrict = self.archs;
        if let Some(value) = var("HUMMING_CUDA_ARCHS") {
            let value = value.to_string_lossy().into_owned();
            let set = nvcc::parse_arch_list(&value).map_err(|message| Error::BadArchs {
                value: value.clone(),
                message,
            })?;
            if !set.is_empty() {
                restrict = Some(restrict.map_or(set, |r| nvcc::intersect(r, set)));
            }
        }

        // 3. Write sources and headers.
        let dir = out_dir.join("humming");
        let io_err = |path: &Path| {
            let path = path.to_path_buf();
            move |source| Error::Io { path, source }
        };
        fs::create_dir_all(&dir).map_err(io_err(&dir))?;
        for (rel, contents) in headers() {
            let path = dir.join("include").join(rel);
            cache::write_if_changed(&path, contents.as_bytes()).map_err(io_err(&path))?;
        }
        let mut jobs: Vec<Job> = Vec::new();
        let mut index: HashMap<String, usize> = HashMap::new();
        for k in &scanned.kernels {
            let hash = k.spec.hash_hex();
            if let Some(&i) = index.get(&hash) {
                if !jobs[i].names.contains(&k.name) {
                    jobs[i].names.push(k.name.clone());
                }
                continue;
            }
            let archs = restrict.map_or(k.spec.archs, |r| nvcc::intersect(r, k.spec.archs));
            let source = humming_spec::codegen::generate_cuda(&k.spec);
            let cu = dir.join(format!("{hash}.cu"));
            cache::write_if_changed(&cu, source.as_bytes()).map_err(io_err(&cu))?;
            index.insert(hash.clone(), jobs.len());
            jobs.push(Job {
                fatbin: dir.join(format!("{hash}.fatbin")),
                log: dir.join(format!("{hash}.ptxas.log")),
                stamp: dir.join(format!("{hash}.key")),
                cu,
                names: vec![k.name.clone()],
                file: k.file.clone(),
                spec: k.spec,
                archs,
                source,
                hash,
            });
        }
        report.kernels_found = jobs.len();

        if !jobs.is_empty() {
            self.compile_all(&dir, &jobs, env, emit, &mut report)?;
        }
        report.seconds = start.elapsed().as_secs_f64();
        let path = dir.join("build-report.txt");
        cache::write_atomic(&path, report.to_string().as_bytes()).map_err(io_err(&path))?;
        emit(format!(
            "humming: {} kernel(s): {} compiled, {} cache hit(s), {} up to date, {} placeholder(s) in {:.2} s",
            report.kernels_found,
            report.compiled,
            report.cache_hits,
            report.up_to_date,
            report.placeholders,
            report.seconds
        ));
        Ok(report)
    }

    /// Finds NVCC and produces a fatbin (or a placeholder) for every job.
    fn compile_all(
        &self,
        dir: &Path,
        jobs: &[Job],
        env: &dyn Fn(&str) -> Option<OsString>,
        emit: &mut dyn FnMut(String),
        report: &mut Report,
    ) -> Result<(), Error> {
        let var = |k: &str| env(k).filter(|v| !v.is_empty());
        let flag = |k: &str| {
            var(k).map(|v| {
                matches!(
                    v.to_string_lossy().to_ascii_lowercase().as_str(),
                    "1" | "true" | "yes" | "on"
                )
            })
        };
        let require = self
            .require_nvcc
            .or_else(|| flag("HUMMING_REQUIRE_NVCC"))
            .or_else(|| flag("CI"))
            .unwrap_or(false);

        // Find NVCC and its version.
        let (nvcc, problem) = match &self.nvcc {
            Some(p) => (
                Some(std::path::absolute(p).unwrap_or_else(|_| p.clone())),
                None,
            ),
            None => {
                let lookup = nvcc::find_nvcc(env, &|p| p.is_file());
                if lookup.depends_on_path() {
                    emit("cargo:rerun-if-env-changed=PATH".into());
                }
                let problem = format!("NVCC not found (checked {})", lookup.describe_tried());
                match lookup.found {
                    Some((p, source)) => {
                        // An NVCC that was asked for by name but not found is worth a word: the
                        // build goes on with another one.
                        if source != nvcc::NvccSource::NvccEnv
                            && let Some(asked) = env("NVCC").filter(|v| !v.is_empty())
                        {
                            emit(format!(
                                "cargo:warning=humming: NVCC={} is not a file; using {} instead",
                                asked.to_string_lossy(),
                                p.display()
                            ));
                        }
                        (Some(std::path::absolute(&p).unwrap_or(p)), None)
                    }
                    None => (None, Some(problem)),
                }
            }
        };
        let version = match &nvcc {
            Some(p) => match nvcc::nvcc_version(p) {
                Ok(v) => Ok((p.clone(), v)),
                Err(e) => Err(e),
            },
            None => Err(problem.unwrap_or_default()),
        };
        let (nvcc, version) = match version {
            Ok(found) => found,
            Err(problem) => {
                if require {
                    return Err(Error::NvccMissing(format!(
                        "{problem}. NVCC is required because {}. Install the CUDA toolkit, or run the humming \
                         repository's scripts/install-cuda-toolchain.sh and export the CUDA_HOME it prints \
                         (or set NVCC); set HUMMING_REQUIRE_NVCC=0 to build without it.",
                        if self.require_nvcc == Some(true) {
                            "Config::require_nvcc(true) is set"
                        } else if flag("HUMMING_REQUIRE_NVCC").is_some() {
                            "HUMMING_REQUIRE_NVCC is set"
                        } else {
                            "CI is set"
                        }
                    )));
                }
                emit(format!(
                    "cargo:warning=humming: {problem}; {} gemm! kernel(s) will be compiled at run time by NVRTC instead. \
                     To compile them ahead of time, install the CUDA toolkit or run the humming repository's \
                     scripts/install-cuda-toolchain.sh, export the CUDA_HOME it prints (or set NVCC), and rebuild; \
                     HUMMING_REQUIRE_NVCC=1 makes this an error.",
                    jobs.len()
                ));
                for job in jobs {
                    job.placeholder(&format!("not compiled: {problem}"))?;
                    report.push(job, KernelStatus::Placeholder, 0.0);
                }
                return Ok(());
            }
        };
        emit(format!("cargo:rerun-if-changed={}", nvcc.display()));
        report.nvcc = Some(nvcc.clone());
        report.nvcc_version = Some(nvcc::version_summary(&version));

        // Up to date, cached, or to compile.
        let cache_dir = if self.no_cache {
            None
        } else {
            self.cache_dir.clone().or_else(|| cache::cache_dir(env))
        };
        let mut todo: Vec<(&Job, Vec<String>, String)> = Vec::new();
        let mut cache_warning: Option<String> = None;
        for job in jobs {
            if job.archs.is_empty() {
                let wanted: Vec<&str> = job.spec.archs.iter().map(Arch::name).collect();
                emit(format!(
                    "cargo:warning=humming: kernel {} targets {} but the allowed archs (HUMMING_CUDA_ARCHS or \
                     Config::archs) exclude all of them; it will be compiled at run time by NVRTC.",
                    job.names.join("/"),
                    wanted.join(", ")
                ));
                job.placeholder(
                    "not compiled: no arch left after HUMMING_CUDA_ARCHS / Config::archs",
                )?;
                report.push(job, KernelStatus::Placeholder, 0.0);
                continue;
            }
            let flags = nvcc::compile_flags("include", job.archs, &self.flags);
            let key = cache::cache_key(&job.source, headers(), GENERATOR_VERSION, &version, &flags);
            if job.is_up_to_date(&key) {
                report.push(job, KernelStatus::UpToDate, 0.0);
                continue;
            }
            if let Some(entry) = cache_dir.as_ref().map(|d| cache::Entry::new(d, &key)) {
                let t = Instant::now();
                if let Some((fatbin, log)) = entry.read() {
                    job.install(&fatbin, &log, &key)?;
                    report.push(job, KernelStatus::CacheHit, t.elapsed().as_secs_f64());
                    continue;
                }
            }
            todo.push((job, flags, key));
        }

        // Compile, NUM_JOBS at a time.
        let threads = self
            .jobs
            .or_else(|| var("NUM_JOBS").and_then(|v| v.to_string_lossy().trim().parse().ok()))
            .or_else(|| std::thread::available_parallelism().ok().map(|n| n.get()))
            .unwrap_or(1)
            .clamp(1, todo.len().max(1));
        for (job, _, _) in &todo {
            let archs: Vec<&str> = job.archs.iter().map(Arch::name).collect();
            emit(format!(
                "humming: compiling {} ({}) for {}",
                job.hash,
                job.names.join("/"),
                archs.join(", ")
            ));
        }
        let next = AtomicUsize::new(0);
        let compile = |i: usize| {
            let (job, flags, _) = &todo[i];
            let t = Instant::now();
            (
                compile_one(&nvcc, dir, job, flags),
                t.elapsed().as_secs_f64(),
            )
        };
        let mut results: Vec<Option<(CompileResult, f64)>> =
            (0..todo.len()).map(|_| None).collect();
        std::thread::scope(|s| {
            let workers: Vec<_> = (0..threads)
                .map(|_| {
                    s.spawn(|| {
                        let mut done = Vec::new();
                        loop {
                            let i = next.fetch_add(1, Ordering::Relaxed);
                            if i >= todo.len() {
                                break done;
                            }
                            done.push((i, compile(i)));
                        }
                    })
                })
                .collect();
            for worker in workers {
                for (i, r) in worker.join().unwrap_or_default() {
                    results[i] = Some(r);
                }
            }
        });

        let mut failures = Vec::new();
        for ((job, flags, key), result) in todo.iter().zip(results) {
            let (result, seconds) = result.unwrap_or_else(|| {
                (
                    Err(NvccFailure::new(
                        job,
                        command_line(&nvcc, dir, job, flags),
                        "not run",
                        "a compile thread panicked",
                    )),
                    0.0,
                )
            });
            match result {
                Ok(Compiled { fatbin, log }) => {
                    job.install(&fatbin, &log, key)?;
                    if let Some(d) = &cache_dir
                        && let Err(e) = cache::Entry::new(d, key).store(&fatbin, &log)
                    {
                        cache_warning.get_or_insert(format!(
                            "cannot write the NVCC cache in {}: {e}",
                            d.display()
                        ));
                    }
                    report.push(job, KernelStatus::Compiled, seconds);
                }
                Err(f) => failures.push(*f),
            }
        }
        if let Some(w) = cache_warning {
            emit(format!(
                "cargo:warning=humming: {w} (the build is not affected)"
            ));
        }
        if failures.is_empty() {
            Ok(())
        } else {
            Err(Error::NvccFailed(failures))
        }
    }
}

/// One distinct kernel to produce.
struct Job {
    hash: String,
    names: Vec<String>,
    file: PathBuf,
    spec: KernelSpec,
    archs: ArchSet,
    source: String,
    cu: PathBuf,
    fatbin: PathBuf,
    log: PathBuf,
    /// Holds the cache key of the fatbin in `fatbin`.
    stamp: PathBuf,
}

impl Job {
    fn is_up_to_date(&self, key: &str) -> bool {
        fs::read_to_string(&self.stamp).is_ok_and(|s| s == key)
            && fs::metadata(&self.fatbin).is_ok_and(|m| m.len() > 0)
            && self.log.is_file()
    }

    /// Puts a fatbin and its log in place, then the stamp that says which key they belong to.
    fn install(&self, fatbin: &[u8], log: &[u8], key: &str) -> Result<(), Error> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| Error::Io { path, source }
        };
        cache::write_if_changed(&self.fatbin, fatbin).map_err(io(&self.fatbin))?;
        cache::write_if_changed(&self.log, log).map_err(io(&self.log))?;
        cache::write_if_changed(&self.stamp, key.as_bytes()).map_err(io(&self.stamp))?;
        Ok(())
    }

    /// Writes an empty fatbin (the runtime then uses NVRTC) and a log that says why.
    fn placeholder(&self, why: &str) -> Result<(), Error> {
        let _ = fs::remove_file(&self.stamp);
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| Error::Io { path, source }
        };
        cache::write_if_changed(&self.fatbin, b"").map_err(io(&self.fatbin))?;
        cache::write_if_changed(&self.log, format!("{why}\n").as_bytes()).map_err(io(&self.log))?;
        Ok(())
    }
}

/// The outcome of one NVCC run.
type CompileResult = Result<Compiled, Box<NvccFailure>>;

struct Compiled {
    fatbin: Vec<u8>,
    log: Vec<u8>,
}

/// The command line of one compilation, for messages.
fn command_line(nvcc: &Path, dir: &Path, job: &Job, flags: &[String]) -> String {
    let mut words = vec![nvcc.display().to_string()];
    words.extend(flags.iter().cloned());
    words.extend([
        "-o".to_string(),
        job.fatbin.display().to_string(),
        job.cu.display().to_string(),
    ]);
    let words: Vec<String> = words.iter().map(|w| nvcc::shell_quote(w)).collect();
    format!(
        "cd {} && {}",
        nvcc::shell_quote(&dir.display().to_string()),
        words.join(" ")
    )
}

/// Runs NVCC on one kernel. The fatbin is written to a temporary file, so an interrupted or failed
/// compilation never leaves a partial `<hash>.fatbin`.
fn compile_one(nvcc: &Path, dir: &Path, job: &Job, flags: &[String]) -> CompileResult {
    let tmp = humming_spec::cache::temp_path(&job.fatbin);
    let command = command_line(nvcc, dir, job, flags);
    let output = Command::new(nvcc)
        .current_dir(dir)
        .args(flags)
        .arg("-o")
        .arg(&tmp)
        .arg(&job.cu)
        .output();
    let output = match output {
        Ok(o) => o,
        Err(e) => {
            return Err(NvccFailure::new(
                job,
                command,
                "could not start",
                &e.to_string(),
            ));
        }
    };
    let mut log = output.stderr.clone();
    log.extend_from_slice(&output.stdout);
    let fatbin = fs::read(&tmp);
    let _ = fs::remove_file(&tmp);
    if !output.status.success() {
        return Err(NvccFailure::new(
            job,
            command,
            &output.status.to_string(),
            &String::from_utf8_lossy(&log),
        ));
    }
    match fatbin {
        Ok(fatbin) if !fatbin.is_empty() => Ok(Compiled { fatbin, log }),
        Ok(_) => Err(NvccFailure::new(
            job,
            command,
            "empty output",
            "NVCC succeeded but wrote an empty fatbin",
        )),
        Err(e) => Err(NvccFailure::new(
            job,
            command,
            "no output",
            &format!("cannot read NVCC's output: {e}"),
        )),
    }
}

#[cfg(test)]
mod tests;

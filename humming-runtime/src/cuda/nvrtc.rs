//! The fallback compilation: a kernel's generated source compiled at run time by NVRTC to machine
//! code, through a disk cache.

use super::driver;
use crate::error::{Error, Result};
use humming_spec::cache::{cache_dir, write_atomic};
use std::path::{Path, PathBuf};

/// NVRTC options of every run-time compilation (besides the arch and the include path).
const NVRTC_OPTIONS: [&str; 1] = ["-std=c++17"];

fn io_err(path: &Path) -> impl Fn(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.display().to_string(),
        source,
    }
}

/// The `--gpu-architecture` of compute capability `cap` (arch-specific features included, as the
/// kernels need them on Hopper).
fn nvrtc_arch(cap: u32) -> &'static str {
    match cap {
        80 => "sm_80",
        86 => "sm_86",
        87 => "sm_87",
        89 => "sm_89",
        90 => "sm_90a",
        100 => "sm_100a",
        103 => "sm_103a",
        120 => "sm_120a",
        121 => "sm_121a",
        _ => "sm_80",
    }
}

/// Compiles a generated source with NVRTC to a cubin (machine code) for compute capability `cap`,
/// through a disk cache keyed by the source, the headers, the NVRTC version, the arch and the options
/// (`<cache>/nvrtc/<sha256>.cubin`, [`humming_spec::cache::cache_dir`]; the system temp folder where
/// no cache folder is set). Compiling to machine code, not PTX, spares the driver a second
/// compilation at every load.
///
/// Errors: [`Error::Nvrtc`] when libnvrtc cannot be loaded or the compilation fails (with NVRTC's log),
/// [`Error::Io`] when the cache cannot be written.
pub fn nvrtc_compile(name: &str, source: &str, cap: u32) -> Result<Vec<u8>> {
    use sha2::Digest;
    let fail = |msg: String| Error::Nvrtc {
        kernel: name.to_string(),
        msg,
    };
    if !driver::nvrtc_present() {
        return Err(fail("libnvrtc could not be loaded; install the CUDA NVRTC library (e.g. `pip install nvidia-cuda-nvrtc==13.0.88` and add its lib folder to LD_LIBRARY_PATH), or build with NVCC".into()));
    }
    let (major, minor) = driver::nvrtc_version();
    let arch = nvrtc_arch(cap);
    let headers = humming_spec::codegen::headers();
    let mut h = sha2::Sha256::new();
    h.update(source.as_bytes());
    for (p, c) in headers {
        h.update(p.as_bytes());
        h.update(c.as_bytes());
    }
    h.update(format!("nvrtc {major}.{minor} {arch} {NVRTC_OPTIONS:?} cubin").as_bytes());
    let key = crate::spec::hex(&h.finalize());
    let dir = cache_dir()
        .unwrap_or_else(|| std::env::temp_dir().join("humming"))
        .join("nvrtc");
    let cubin_path = dir.join(format!("{key}.cubin"));
    if let Ok(cubin) = std::fs::read(&cubin_path)
        && !cubin.is_empty()
    {
        return Ok(cubin);
    }
    let include = include_dir(&dir, &key);
    for (p, c) in headers {
        let path = include.join(p);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(io_err(parent))?;
        }
        std::fs::write(&path, c).map_err(io_err(&path))?;
    }
    let mut options: Vec<String> = NVRTC_OPTIONS.iter().map(|o| o.to_string()).collect();
    options.push(format!("--gpu-architecture={arch}"));
    options.push(format!("--include-path={}", include.display()));
    let result = driver::nvrtc_cubin(name, source, &options);
    let _ = std::fs::remove_dir_all(&include);
    let cubin = result.map_err(fail)?;
    write_atomic(&cubin_path, &cubin).map_err(io_err(&cubin_path))?;
    Ok(cubin)
}

/// The folder of one compilation's header files under `dir`: its own for every call, so that threads
/// of one process compiling the same source at once never write into, or remove, each other's
/// headers.
fn include_dir(dir: &Path, key: &str) -> PathBuf {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let call = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    dir.join(format!(
        "include-{}-{}-{call}",
        &key[..16.min(key.len())],
        std::process::id()
    ))
}

#[cfg(test)]
mod tests {
    use super::include_dir;

    /// Two compilations of one source (the same key) in one process get different header folders,
    /// also from different threads.
    #[test]
    fn include_dirs_are_unique_per_compilation() {
        let dir = std::path::Path::new("/tmp/humming-test");
        let key = "0123456789abcdef0123456789abcdef";
        let here = [include_dir(dir, key), include_dir(dir, key)];
        let there = std::thread::spawn(move || include_dir(dir, key))
            .join()
            .unwrap();
        assert_ne!(here[0], here[1]);
        assert_ne!(here[0], there);
        assert_ne!(here[1], there);
        for p in here.iter().chain([&there]) {
            assert!(p.starts_with(dir), "{p:?} is not under {dir:?}");
        }
    }
}

//! Where humming keeps compiled kernels outside `target/`, and the atomic file write both the build
//! helper (NVCC fatbins) and the runtime (NVRTC cubins) use for it.

use std::ffi::OsString;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The cache folder: `$HUMMING_CACHE_DIR`, else `$XDG_CACHE_HOME/humming`, else
/// `$HOME/.cache/humming`, reading variables through `env`. `None` if none of them is set (empty
/// values count as unset; a relative `XDG_CACHE_HOME` is ignored, as the XDG spec asks). The build
/// helper keeps fatbins in its `nvcc/` subfolder, the runtime cubins in `nvrtc/`.
pub fn cache_dir_with(env: &dyn Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
    let var = |k: &str| env(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    var("HUMMING_CACHE_DIR")
        .or_else(|| {
            var("XDG_CACHE_HOME")
                .filter(|p| p.is_absolute())
                .map(|p| p.join("humming"))
        })
        .or_else(|| var("HOME").map(|p| p.join(".cache").join("humming")))
}

/// [`cache_dir_with`] the process's environment.
pub fn cache_dir() -> Option<PathBuf> {
    cache_dir_with(&|k| std::env::var_os(k))
}

/// A temporary file name next to `path`, unique to this process and call.
pub fn temp_path(path: &Path) -> PathBuf {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.{}.{n}.tmp", std::process::id()))
}

/// Writes `bytes` to a temporary file next to `path`, then renames it over `path`: readers see the
/// old file or the whole new one, never a part, also with several writers at once.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let tmp = temp_path(path);
    let result = fs::write(&tmp, bytes).and_then(|()| fs::rename(&tmp, path));
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env_of(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> {
        let vars: HashMap<String, OsString> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), OsString::from(v)))
            .collect();
        move |k| vars.get(k).cloned()
    }

    #[test]
    fn cache_dir_order() {
        let all = [
            ("HUMMING_CACHE_DIR", "/c"),
            ("XDG_CACHE_HOME", "/x"),
            ("HOME", "/h"),
        ];
        assert_eq!(cache_dir_with(&env_of(&all)), Some(PathBuf::from("/c")));
        assert_eq!(
            cache_dir_with(&env_of(&all[1..])),
            Some(PathBuf::from("/x/humming"))
        );
        assert_eq!(
            cache_dir_with(&env_of(&all[2..])),
            Some(PathBuf::from("/h/.cache/humming"))
        );
        assert_eq!(
            cache_dir_with(&env_of(&[
                ("HUMMING_CACHE_DIR", ""),
                ("XDG_CACHE_HOME", "relative"),
                ("HOME", "/h")
            ])),
            Some(PathBuf::from("/h/.cache/humming"))
        );
        assert_eq!(cache_dir_with(&env_of(&[])), None);
    }

    #[test]
    fn temp_paths_are_unique() {
        let p = Path::new("/d/f.cubin");
        let (a, b) = (temp_path(p), temp_path(p));
        assert_ne!(a, b);
        assert_eq!(a.parent(), p.parent());
    }
}

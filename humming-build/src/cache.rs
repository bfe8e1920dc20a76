//! The content-addressed NVCC cache, kept outside `target/` so that clean builds, other profiles and
//! other checkouts reuse compiled kernels; and small file helpers that write atomically.

use sha2::{Digest, Sha256};
use std::ffi::OsString;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// The NVCC cache folder: the `nvcc/` subfolder of [`humming_spec::cache::cache_dir_with`] `env`.
pub fn cache_dir(env: &dyn Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
    humming_spec::cache::cache_dir_with(env).map(|d| d.join("nvcc"))
}

/// The cache key of one compilation: SHA-256 (lower-case hex) over the generated source, every
/// header's path and contents, the generator version, the exact `nvcc --version` output and every
/// flag. Each part is length-prefixed, so no two different inputs give the same byte stream.
pub fn cache_key<P: AsRef<str>, C: AsRef<str>>(
    source: &str,
    headers: &[(P, C)],
    generator_version: &str,
    nvcc_version: &str,
    flags: &[String],
) -> String {
    let mut h = Sha256::new();
    let mut part = |tag: &str, bytes: &[u8]| {
        h.update((tag.len() as u64).to_le_bytes());
        h.update(tag.as_bytes());
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    };
    part("humming-build-cache-v1", b"");
    part("source", source.as_bytes());
    for (path, contents) in headers {
        part("header-path", path.as_ref().as_bytes());
        part("header", contents.as_ref().as_bytes());
    }
    part("generator", generator_version.as_bytes());
    part("nvcc-version", nvcc_version.as_bytes());
    for flag in flags {
        part("flag", flag.as_bytes());
    }
    let digest: [u8; 32] = h.finalize().into();
    humming_spec::hex(&digest)
}

/// One cache entry: `<dir>/<key>.fatbin` and `<dir>/<key>.ptxas.log`.
#[derive(Clone, Debug)]
pub struct Entry {
    /// The fatbin.
    pub fatbin: PathBuf,
    /// The ptxas log.
    pub log: PathBuf,
}

impl Entry {
    /// The entry of `key` in `dir`.
    pub fn new(dir: &Path, key: &str) -> Entry {
        Entry {
            fatbin: dir.join(format!("{key}.fatbin")),
            log: dir.join(format!("{key}.ptxas.log")),
        }
    }

    /// The cached fatbin and log, if the entry is complete (a non-empty fatbin).
    pub fn read(&self) -> Option<(Vec<u8>, Vec<u8>)> {
        let fatbin = fs::read(&self.fatbin).ok().filter(|b| !b.is_empty())?;
        let log = fs::read(&self.log).unwrap_or_default();
        Some((fatbin, log))
    }

    /// Stores a fatbin and its log. The log is written first and the fatbin last, each atomically, so
    /// a reader never sees a partial fatbin, and a present fatbin means a complete entry.
    pub fn store(&self, fatbin: &[u8], log: &[u8]) -> io::Result<()> {
        if let Some(dir) = self.fatbin.parent() {
            fs::create_dir_all(dir)?;
        }
        write_atomic(&self.log, log)?;
        write_atomic(&self.fatbin, fatbin)
    }
}

pub use humming_spec::cache::write_atomic;

/// Writes `bytes` to `path` (atomically) unless it already holds exactly them, so that unchanged
/// outputs keep their modification time and do not make Cargo rebuild what includes them.
/// Returns whether the file was written.
pub fn write_if_changed(path: &Path, bytes: &[u8]) -> io::Result<bool> {
    if fs::read(path).is_ok_and(|old| old == bytes) {
        return Ok(false);
    }
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir)?;
    }
    write_atomic(path, bytes)?;
    Ok(true)
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
    fn nvcc_cache_is_a_subfolder() {
        assert_eq!(
            cache_dir(&env_of(&[("HUMMING_CACHE_DIR", "/c")])),
            Some(PathBuf::from("/c/nvcc"))
        );
        assert_eq!(cache_dir(&env_of(&[])), None);
    }

    #[test]
    fn key_changes_with_every_input() {
        let headers = [("humming/a.cuh", "A"), ("humming/b.cuh", "B")];
        let flags: Vec<String> = vec!["-O3".into(), "-gencode=arch=compute_90a,code=sm_90a".into()];
        let base = cache_key("src", &headers, "gen-1", "nvcc 13.0", &flags);
        assert_eq!(base.len(), 64);
        assert_eq!(
            base,
            cache_key("src", &headers, "gen-1", "nvcc 13.0", &flags),
            "deterministic"
        );
        let mut keys = vec![
            cache_key("src2", &headers, "gen-1", "nvcc 13.0", &flags),
            cache_key(
                "src",
                &[("humming/a.cuh", "A'"), ("humming/b.cuh", "B")],
                "gen-1",
                "nvcc 13.0",
                &flags,
            ),
            cache_key(
                "src",
                &[("humming/c.cuh", "A"), ("humming/b.cuh", "B")],
                "gen-1",
                "nvcc 13.0",
                &flags,
            ),
            cache_key("src", &headers[..1], "gen-1", "nvcc 13.0", &flags),
            cache_key("src", &headers, "gen-2", "nvcc 13.0", &flags),
            cache_key("src", &headers, "gen-1", "nvcc 13.1", &flags),
            cache_key("src", &headers, "gen-1", "nvcc 13.0", &flags[..1]),
            cache_key(
                "src",
                &headers,
                "gen-1",
                "nvcc 13.0",
                &["-O3".into(), "-gencode=arch=compute_80,code=sm_80".into()],
            ),
            // Moving bytes between parts changes the key too.
            cache_key("srcgen-1", &headers, "", "nvcc 13.0", &flags),
            cache_key(
                "src",
                &headers,
                "gen-1",
                "nvcc 13.0",
                &["-O3-gencode=arch=compute_90a,code=sm_90a".into()],
            ),
        ];
        keys.push(base);
        let n = keys.len();
        keys.sort();
        keys.dedup();
        assert_eq!(keys.len(), n, "every input must change the key");
    }

    #[test]
    fn atomic_writes() {
        let dir =
            std::env::temp_dir().join(format!("humming-build-cache-test-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let file = dir.join("sub").join("x.bin");
        assert!(write_if_changed(&file, b"one").unwrap());
        assert!(!write_if_changed(&file, b"one").unwrap());
        assert!(write_if_changed(&file, b"two").unwrap());
        assert_eq!(fs::read(&file).unwrap(), b"two");
        let entry = Entry::new(&dir.join("cache"), "k");
        assert!(entry.read().is_none());
        entry.store(b"fat", b"log").unwrap();
        assert_eq!(entry.read(), Some((b"fat".to_vec(), b"log".to_vec())));
        // No temporary files are left behind.
        let leftovers: Vec<_> = fs::read_dir(dir.join("cache"))
            .unwrap()
            .filter_map(|e| e.ok())
            .collect();
        assert_eq!(leftovers.len(), 2);
        fs::remove_dir_all(&dir).unwrap();
    }
}

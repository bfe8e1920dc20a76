//! Finding and driving NVCC.

use humming_spec::{Arch, ArchSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where an NVCC was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NvccSource {
    /// The `NVCC` environment variable (a path, or a program name looked up on `PATH`).
    NvccEnv,
    /// `$CUDA_HOME/bin/nvcc`.
    CudaHome,
    /// `$CUDA_PATH/bin/nvcc`.
    CudaPath,
    /// `nvcc` on `PATH`.
    Path,
    /// `/usr/local/cuda/bin/nvcc`.
    Default,
    /// The pinned PyPI toolchain of `scripts/install-cuda-toolchain.sh`:
    /// `$HUMMING_TOOLCHAIN_DIR` (default `$HOME/.cache/humming/toolchain/cuda-13.0.88`)
    /// `/venv/lib/python3.X/site-packages/nvidia/cu13/bin/nvcc`.
    Toolchain,
}

/// The result of [`find_nvcc`].
#[derive(Clone, Debug, Default)]
pub struct NvccLookup {
    /// The NVCC found, and where.
    pub found: Option<(PathBuf, NvccSource)>,
    /// Every path checked, in order, with the rule that gave it (for messages).
    pub tried: Vec<(PathBuf, NvccSource)>,
}

impl NvccLookup {
    /// A short account of what was checked, for messages: single candidates by path, a `PATH` search
    /// as a count (`nvcc in 9 PATH folders`).
    pub fn describe_tried(&self) -> String {
        if self.tried.is_empty() {
            return "nothing to check".into();
        }
        let mut parts: Vec<String> = Vec::new();
        let mut i = 0;
        while i < self.tried.len() {
            let (path, source) = &self.tried[i];
            let run = self.tried[i..]
                .iter()
                .take_while(|(_, s)| s == source)
                .count();
            let what = match source {
                NvccSource::NvccEnv => "$NVCC",
                NvccSource::CudaHome => "$CUDA_HOME",
                NvccSource::CudaPath => "$CUDA_PATH",
                NvccSource::Path => "PATH",
                NvccSource::Default => "default",
                NvccSource::Toolchain => "humming toolchain",
            };
            if run == 1 {
                parts.push(format!("{} ({what})", path.display()));
            } else {
                let name = path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                parts.push(format!("{name} in {run} PATH folders"));
            }
            i += run;
        }
        parts.join(", ")
    }

    /// True if the outcome may change with `PATH`: NVCC was not given by `NVCC`, `CUDA_HOME` or
    /// `CUDA_PATH`.
    pub fn depends_on_path(&self) -> bool {
        !matches!(
            self.found,
            Some((
                _,
                NvccSource::NvccEnv | NvccSource::CudaHome | NvccSource::CudaPath
            ))
        )
    }
}

/// The file name of the NVCC program on this host (`nvcc`, or `nvcc.exe` on Windows).
pub fn nvcc_file_name() -> String {
    format!("nvcc{}", std::env::consts::EXE_SUFFIX)
}

/// Finds NVCC, in this order: `$NVCC`, `$CUDA_HOME/bin/nvcc`, `$CUDA_PATH/bin/nvcc`, `nvcc` on
/// `$PATH`, `/usr/local/cuda/bin/nvcc`, then the pinned toolchain that
/// `scripts/install-cuda-toolchain.sh` installs (`$HUMMING_TOOLCHAIN_DIR`, default
/// `~/.cache/humming/toolchain/cuda-13.0.88`). The first candidate that is a file wins.
///
/// `env` reads an environment variable and `is_file` tests a path, so the order can be tested with a
/// fake environment; [`find_nvcc_in_env`] uses the real ones. Empty variables count as unset. A
/// `NVCC` value without a path separator (`NVCC=nvcc-13`) is looked up on `PATH`.
pub fn find_nvcc(
    env: &dyn Fn(&str) -> Option<OsString>,
    is_file: &dyn Fn(&Path) -> bool,
) -> NvccLookup {
    let var = |k: &str| env(k).filter(|v| !v.is_empty());
    let path_dirs: Vec<PathBuf> = var("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    let mut lookup = NvccLookup::default();
    let check = |candidate: PathBuf, source: NvccSource, lookup: &mut NvccLookup| -> bool {
        let hit = is_file(&candidate);
        lookup.tried.push((candidate.clone(), source));
        if hit {
            lookup.found = Some((candidate, source));
        }
        hit
    };
    if let Some(nvcc) = var("NVCC") {
        let as_path = PathBuf::from(&nvcc);
        if as_path.components().count() == 1 && !as_path.is_absolute() {
            for dir in &path_dirs {
                if check(dir.join(&as_path), NvccSource::NvccEnv, &mut lookup) {
                    return lookup;
                }
            }
        } else if check(as_path, NvccSource::NvccEnv, &mut lookup) {
            return lookup;
        }
    }
    for (key, source) in [
        ("CUDA_HOME", NvccSource::CudaHome),
        ("CUDA_PATH", NvccSource::CudaPath),
    ] {
        if let Some(root) = var(key)
            && check(
                PathBuf::from(root).join("bin").join(nvcc_file_name()),
                source,
                &mut lookup,
            )
        {
            return lookup;
        }
    }
    for dir in &path_dirs {
        if check(dir.join(nvcc_file_name()), NvccSource::Path, &mut lookup) {
            return lookup;
        }
    }
    if check(
        PathBuf::from("/usr/local/cuda/bin").join(nvcc_file_name()),
        NvccSource::Default,
        &mut lookup,
    ) {
        return lookup;
    }
    let toolchain = var("HUMMING_TOOLCHAIN_DIR").map(PathBuf::from).or_else(|| {
        var("HOME").map(|h| PathBuf::from(h).join(".cache/humming/toolchain/cuda-13.0.88"))
    });
    if let Some(dir) = toolchain {
        for minor in 8..=20 {
            let candidate = dir
                .join(format!(
                    "venv/lib/python3.{minor}/site-packages/nvidia/cu13/bin"
                ))
                .join(nvcc_file_name());
            if is_file(&candidate) {
                check(candidate, NvccSource::Toolchain, &mut lookup);
                return lookup;
            }
        }
        lookup.tried.push((dir, NvccSource::Toolchain));
    }
    lookup
}

/// [`find_nvcc`] with the process environment and the file system.
pub fn find_nvcc_in_env() -> NvccLookup {
    find_nvcc(&|k| std::env::var_os(k), &|p| p.is_file())
}

/// The `-gencode` flag that compiles SASS for `arch`: `sm_90a` gives
/// `-gencode=arch=compute_90a,code=sm_90a` (the arch-specific form, needed for `wgmma`).
pub fn gencode_flag(arch: Arch) -> String {
    let suffix = arch.name().trim_start_matches("sm_");
    format!("-gencode=arch=compute_{suffix},code=sm_{suffix}")
}

/// The flags every kernel is compiled with, in order: `-std=c++17 -O3 -fatbin --ptxas-options=-v`,
/// `-I <include_dir>`, one [`gencode_flag`] per arch, then `extra`. Input and output paths are not
/// included.
pub fn compile_flags(include_dir: &str, archs: ArchSet, extra: &[String]) -> Vec<String> {
    let mut flags: Vec<String> = [
        "-std=c++17",
        "-O3",
        "-fatbin",
        "--ptxas-options=-v",
        "-I",
        include_dir,
    ]
    .map(String::from)
    .into();
    flags.extend(archs.iter().map(gencode_flag));
    flags.extend(extra.iter().cloned());
    flags
}

/// Parses an arch list such as `sm_80,sm_90a` (commas or white space; `90a` is read as `sm_90a`).
/// Errors name the first entry that is not an arch.
pub fn parse_arch_list(list: &str) -> Result<ArchSet, String> {
    let mut set = ArchSet::default();
    for item in list
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|s| !s.is_empty())
    {
        let name = if item.starts_with("sm_") {
            item.to_string()
        } else {
            format!("sm_{item}")
        };
        match Arch::parse(&name) {
            Some(a) => {
                set.insert(a);
            }
            None => {
                let known: Vec<&str> = Arch::ALL.iter().map(|a| a.name()).collect();
                return Err(format!(
                    "`{item}` is not a CUDA arch humming knows (expected one of {})",
                    known.join(", ")
                ));
            }
        }
    }
    Ok(set)
}

/// The archs in both sets.
pub fn intersect(a: ArchSet, b: ArchSet) -> ArchSet {
    ArchSet(a.0 & b.0)
}

/// Runs `nvcc --version` and returns its standard output, or a description of what went wrong.
pub fn nvcc_version(nvcc: &Path) -> Result<String, String> {
    let out = Command::new(nvcc)
        .arg("--version")
        .output()
        .map_err(|e| format!("cannot run `{} --version`: {e}", nvcc.display()))?;
    if !out.status.success() {
        return Err(format!(
            "`{} --version` failed ({}): {}",
            nvcc.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The last non-empty line of `nvcc --version` (e.g. `Build cuda_13.0.r13.0/compiler.36424714_0`),
/// or the release line when present (`Cuda compilation tools, release 13.0, V13.0.88`).
pub fn version_summary(version: &str) -> String {
    version
        .lines()
        .find(|l| l.contains("release"))
        .or_else(|| version.lines().rev().find(|l| !l.trim().is_empty()))
        .unwrap_or("")
        .trim()
        .to_string()
}

/// Quotes an argument for display in a shell command line (not for execution).
pub fn shell_quote(arg: &str) -> String {
    if !arg.is_empty()
        && arg
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_=.,/:+@%".contains(c))
    {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn lookup(vars: &[(&str, &str)], files: &[&str]) -> NvccLookup {
        let vars: HashMap<String, OsString> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), OsString::from(v)))
            .collect();
        let files: Vec<PathBuf> = files.iter().map(PathBuf::from).collect();
        find_nvcc(&|k| vars.get(k).cloned(), &|p| files.iter().any(|f| f == p))
    }

    fn found(l: &NvccLookup) -> Option<(String, NvccSource)> {
        l.found.as_ref().map(|(p, s)| (p.display().to_string(), *s))
    }

    #[test]
    fn toolchain_is_the_last_resort() {
        let tc = "/h/.cache/humming/toolchain/cuda-13.0.88/venv/lib/python3.11/site-packages/nvidia/cu13/bin/nvcc";
        let l = lookup(&[("HOME", "/h")], &[tc]);
        assert_eq!(found(&l), Some((tc.into(), NvccSource::Toolchain)));
        let custom = "/t/venv/lib/python3.12/site-packages/nvidia/cu13/bin/nvcc";
        let l = lookup(
            &[("HOME", "/h"), ("HUMMING_TOOLCHAIN_DIR", "/t")],
            &[custom, tc],
        );
        assert_eq!(found(&l), Some((custom.into(), NvccSource::Toolchain)));
        // Anything found earlier wins.
        let l = lookup(&[("HOME", "/h"), ("CUDA_HOME", "/c")], &["/c/bin/nvcc", tc]);
        assert_eq!(
            found(&l),
            Some(("/c/bin/nvcc".into(), NvccSource::CudaHome))
        );
        // Nothing there: still no NVCC, and the toolchain folder is listed as tried.
        let l = lookup(&[("HOME", "/h")], &[]);
        assert_eq!(found(&l), None);
        assert!(l.tried.iter().any(|(_, s)| *s == NvccSource::Toolchain));
    }

    #[test]
    fn lookup_order() {
        let all_files = [
            "/opt/explicit/nvcc",
            "/opt/home/bin/nvcc",
            "/opt/path/bin/nvcc",
            "/usr/bin/nvcc",
            "/usr/local/cuda/bin/nvcc",
        ];
        let all_vars = [
            ("NVCC", "/opt/explicit/nvcc"),
            ("CUDA_HOME", "/opt/home"),
            ("CUDA_PATH", "/opt/path"),
            ("PATH", "/bin:/usr/bin"),
        ];
        let l = lookup(&all_vars, &all_files);
        assert_eq!(
            found(&l),
            Some(("/opt/explicit/nvcc".into(), NvccSource::NvccEnv))
        );
        assert!(!l.depends_on_path());
        let l = lookup(&all_vars[1..], &all_files);
        assert_eq!(
            found(&l),
            Some(("/opt/home/bin/nvcc".into(), NvccSource::CudaHome))
        );
        let l = lookup(&all_vars[2..], &all_files);
        assert_eq!(
            found(&l),
            Some(("/opt/path/bin/nvcc".into(), NvccSource::CudaPath))
        );
        let l = lookup(&all_vars[3..], &all_files);
        assert_eq!(found(&l), Some(("/usr/bin/nvcc".into(), NvccSource::Path)));
        assert_eq!(
            l.tried,
            [
                (PathBuf::from("/bin/nvcc"), NvccSource::Path),
                (PathBuf::from("/usr/bin/nvcc"), NvccSource::Path)
            ]
        );
        assert!(l.depends_on_path());
        let l = lookup(&[], &all_files);
        assert_eq!(
            found(&l),
            Some(("/usr/local/cuda/bin/nvcc".into(), NvccSource::Default))
        );
        assert!(l.depends_on_path());
    }

    #[test]
    fn lookup_skips_missing_and_empty() {
        // NVCC points nowhere and CUDA_HOME is empty: fall through to CUDA_PATH.
        let l = lookup(
            &[
                ("NVCC", "/nope/nvcc"),
                ("CUDA_HOME", ""),
                ("CUDA_PATH", "/opt/path"),
            ],
            &["/opt/path/bin/nvcc", "/usr/local/cuda/bin/nvcc"],
        );
        assert_eq!(
            found(&l),
            Some(("/opt/path/bin/nvcc".into(), NvccSource::CudaPath))
        );
        assert_eq!(
            l.tried,
            [
                (PathBuf::from("/nope/nvcc"), NvccSource::NvccEnv),
                (PathBuf::from("/opt/path/bin/nvcc"), NvccSource::CudaPath)
            ]
        );
        // Nothing anywhere.
        let l = lookup(&[("PATH", "/a:/b")], &[]);
        assert_eq!(found(&l), None);
        assert_eq!(l.tried.len(), 3);
        assert_eq!(
            l.describe_tried(),
            "nvcc in 2 PATH folders, /usr/local/cuda/bin/nvcc (default)"
        );
        assert!(l.depends_on_path());
    }

    #[test]
    fn nvcc_env_program_name_uses_path() {
        let l = lookup(
            &[("NVCC", "nvcc"), ("PATH", "/a:/b")],
            &["/b/nvcc", "/usr/local/cuda/bin/nvcc"],
        );
        assert_eq!(found(&l), Some(("/b/nvcc".into(), NvccSource::NvccEnv)));
    }

    #[test]
    fn gencode_flags() {
        assert_eq!(
            gencode_flag(Arch::Sm90a),
            "-gencode=arch=compute_90a,code=sm_90a"
        );
        assert_eq!(
            gencode_flag(Arch::Sm80),
            "-gencode=arch=compute_80,code=sm_80"
        );
        assert_eq!(
            gencode_flag(Arch::Sm75),
            "-gencode=arch=compute_75,code=sm_75"
        );
        assert_eq!(
            gencode_flag(Arch::Sm120a),
            "-gencode=arch=compute_120a,code=sm_120a"
        );
        let flags = compile_flags("include", ArchSet::DEFAULT, &["-lineinfo".into()]);
        assert_eq!(
            flags.join(" "),
            "-std=c++17 -O3 -fatbin --ptxas-options=-v -I include \
             -gencode=arch=compute_80,code=sm_80 -gencode=arch=compute_90a,code=sm_90a -lineinfo"
        );
    }

    #[test]
    fn arch_lists() {
        let set = parse_arch_list("sm_90a").unwrap();
        assert_eq!(set.iter().collect::<Vec<_>>(), [Arch::Sm90a]);
        let set = parse_arch_list(" sm_80, 90a ,, sm_86 ").unwrap();
        assert_eq!(
            set.iter().collect::<Vec<_>>(),
            [Arch::Sm80, Arch::Sm86, Arch::Sm90a]
        );
        assert!(parse_arch_list("").unwrap().is_empty());
        let err = parse_arch_list("sm_80,sm90a").unwrap_err();
        assert!(err.contains("`sm90a`"), "{err}");
        let both = intersect(ArchSet::DEFAULT, parse_arch_list("sm_90a,sm_75").unwrap());
        assert_eq!(both.iter().collect::<Vec<_>>(), [Arch::Sm90a]);
    }

    #[test]
    fn quoting() {
        assert_eq!(
            shell_quote("-gencode=arch=compute_80,code=sm_80"),
            "-gencode=arch=compute_80,code=sm_80"
        );
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
    }
}

//! Tests of the scanner on a temporary crate, of the whole build without NVCC, and (when an NVCC is
//! available) an end-to-end compilation with the cache.

use super::*;
use std::collections::HashMap;

/// A temporary folder, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("humming-build-{tag}-{}-{n}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    fn write(&self, rel: &str, text: &str) {
        let path = self.0.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// A `gemm!` invocation declaring one kernel; `b` makes specs differ.
fn kernel(path: &str, name: &str, b: &str) -> String {
    format!(
        "{path}! {{\n    /// doc\n    pub kernel {name} {{ a: f16, b: {b}, scale: group(128, f16) }}\n}}\n"
    )
}

fn names(r: &scan::ScanResult) -> Vec<String> {
    let mut v: Vec<String> = r.kernels.iter().map(|k| k.name.clone()).collect();
    v.sort();
    v
}

/// A crate exercising every scanner rule.
fn sample_crate() -> TempDir {
    let t = TempDir::new("scan");
    t.write(
        "src/lib.rs",
        &format!(
            "use humming::gemm;\n{}\nmod flat;\nmod nested;\n#[path = \"elsewhere/custom.rs\"]\nmod custom;\n\
             mod outer {{\n    mod inner {{\n        {}\n    }}\n    mod deep;\n    #[path = \"p.rs\"]\n    mod with_path;\n}}\n\
             #[path = \"pathdir\"]\nmod inline_with_path {{\n    mod child;\n}}\n\
             mod missing;\nmod broken;\n\
             fn f() -> Vec<u8> {{ let _ = vec![{}]; mod in_fn {{ {} }} Vec::new() }}\n\
             {}\nother::gemm_like! {{ pub kernel NotGemm {{ a: f16, b: u4 }} }}\n",
            kernel("gemm", "Plain", "u4"),
            kernel("humming::gemm", "Inner", "u4"),
            kernel("gemm", "InOtherMacro", "u4").trim_end(),
            kernel("::humming::gemm", "InFn", "u4"),
            // Invalid: missing `b`; the macro reports it, the scanner skips it.
            "gemm! { pub kernel Invalid { a: f16 } }",
        ),
    );
    t.write("src/flat.rs", "mod child;\n");
    t.write("src/flat/child.rs", &kernel("gemm", "FlatChild", "u8"));
    t.write(
        "src/nested/mod.rs",
        &format!("mod sub;\n{}", kernel("gemm", "Nested", "u4")),
    );
    t.write("src/nested/sub.rs", &kernel("gemm", "NestedSub", "u4"));
    // A `#[path]` file acts like a mod.rs: its `mod sib;` is a sibling.
    t.write(
        "src/elsewhere/custom.rs",
        &format!("mod sib;\n{}", kernel("gemm", "Custom", "u4")),
    );
    t.write("src/elsewhere/sib.rs", &kernel("gemm", "CustomSib", "u4"));
    t.write("src/outer/deep.rs", &kernel("gemm", "Deep", "u4"));
    t.write("src/outer/p.rs", &kernel("gemm", "OuterPath", "u4"));
    t.write(
        "src/pathdir/child.rs",
        &kernel("gemm", "InlinePathChild", "u4"),
    );
    t.write(
        "src/broken.rs",
        &format!("{}\nfn oops( {{\n", kernel("gemm", "Broken", "u4")),
    );
    t.write("src/unreached.rs", &kernel("gemm", "Unreached", "u4"));
    t.write("src/bin/tool.rs", &kernel("gemm", "Bin", "u4"));
    t.write(
        "src/bin/multi/main.rs",
        &format!("mod helper;\n{}", kernel("gemm", "BinMulti", "u4")),
    );
    t.write(
        "src/bin/multi/helper.rs",
        &kernel("gemm", "BinHelper", "u4"),
    );
    t.write(
        "tests/it.rs",
        &format!("mod common;\n{}", kernel("humming::gemm", "Test", "u4")),
    );
    t.write("tests/common/mod.rs", &kernel("gemm", "TestCommon", "u4"));
    t.write("tests/ui/deep/case.rs", &kernel("gemm", "TestDeep", "u4"));
    t.write("tests/ui/not_rust.txt", &kernel("gemm", "NotRust", "u4"));
    t.write("examples/ex.rs", &kernel("gemm", "Example", "u4"));
    t.write("benches/bench.rs", &kernel("gemm", "Bench", "u4"));
    t
}

#[test]
fn scanner_walks_module_tree_and_target_dirs() {
    let t = sample_crate();
    let r = scan::scan_crate(&t.0, &[], &[]);
    let mut want = vec![
        "Bench",
        "Bin",
        "BinHelper",
        "BinMulti",
        "Custom",
        "CustomSib",
        "Deep",
        "Example",
        "FlatChild",
        "InFn",
        "InOtherMacro",
        "Inner",
        "InlinePathChild",
        "Nested",
        "NestedSub",
        "OuterPath",
        "Plain",
        "Test",
        "TestCommon",
        "TestDeep",
    ];
    want.sort();
    assert_eq!(names(&r), want);
    assert_eq!(r.invalid, 1, "the declaration without `b`");
    assert_eq!(r.skipped, [t.0.join("src/broken.rs")]);
    assert_eq!(
        r.dirs,
        ["src", "tests", "examples", "benches"].map(|d| t.0.join(d))
    );
    assert!(r.files.contains(&t.0.join("src/flat/child.rs")));
    assert!(!r.files.contains(&t.0.join("src/unreached.rs")));
    // Each file once, even though tests/common/mod.rs is reached twice.
    let mut files = r.files.clone();
    files.sort();
    files.dedup();
    assert_eq!(files.len(), r.files.len());
    // The file of a kernel is where it is declared.
    let k = r.kernels.iter().find(|k| k.name == "NestedSub").unwrap();
    assert_eq!(k.file, t.0.join("src/nested/sub.rs"));
}

#[test]
fn scanner_excludes() {
    let t = sample_crate();
    let exclude = [
        PathBuf::from("tests/ui"),
        PathBuf::from("src/nested/sub.rs"),
        PathBuf::from("benches"),
    ];
    let r = scan::scan_crate(&t.0, &[], &exclude);
    let found = names(&r);
    for gone in ["TestDeep", "NestedSub", "Bench"] {
        assert!(
            !found.iter().any(|n| n == gone),
            "{gone} should be excluded: {found:?}"
        );
    }
    for kept in ["Test", "TestCommon", "Nested", "Plain"] {
        assert!(
            found.iter().any(|n| n == kept),
            "{kept} should be kept: {found:?}"
        );
    }
}

#[test]
fn scanner_extra_files_and_missing_dirs() {
    let t = TempDir::new("scan-extra");
    t.write(
        "gen/kernels.rs",
        &format!("mod more;\n{}", kernel("gemm", "Extra", "u4")),
    );
    t.write("gen/more.rs", &kernel("gemm", "More", "u4"));
    let r = scan::scan_crate(&t.0, &[PathBuf::from("gen/kernels.rs")], &[]);
    assert_eq!(names(&r), ["Extra", "More"]);
    assert!(r.dirs.is_empty());
    // An empty folder: nothing at all, and no failure.
    let empty = TempDir::new("scan-empty");
    let r = scan::scan_crate(&empty.0, &[PathBuf::from("nope.rs")], &[]);
    assert!(r.files.is_empty() && r.kernels.is_empty() && r.skipped.is_empty());
}

/// A fake environment for [`Config::run`].
fn env_of(vars: Vec<(&str, String)>) -> impl Fn(&str) -> Option<OsString> {
    let vars: HashMap<String, OsString> = vars
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.into()))
        .collect();
    move |k| vars.get(k).cloned()
}

fn run(config: &Config, vars: Vec<(&str, String)>) -> (Result<Report, Error>, Vec<String>) {
    let mut lines = Vec::new();
    let result = config.run(&env_of(vars), &mut |l| lines.push(l));
    (result, lines)
}

#[test]
fn no_out_dir_is_a_clear_error() {
    let (r, _) = run(&Config::new().root("/nonexistent"), vec![]);
    let e = r.unwrap_err();
    assert!(matches!(e, Error::NoOutDir));
    assert!(e.to_string().contains("OUT_DIR is not set"), "{e}");
}

#[test]
fn without_nvcc_writes_placeholders_and_one_warning() {
    let t = TempDir::new("nonvcc");
    t.write(
        "src/lib.rs",
        &format!(
            "{}{}{}",
            kernel("gemm", "A", "u4"),
            kernel("gemm", "B", "u8"),
            kernel("gemm", "SameAsA", "u4")
        ),
    );
    t.write("tests/t.rs", &kernel("gemm", "C", "i4"));
    let out = t.0.join("out");
    let config = Config::new()
        .root(&t.0)
        .nvcc(t.0.join("no/such/nvcc"))
        .cache_dir(t.0.join("cache"));
    let (r, lines) = run(&config, vec![("OUT_DIR", out.display().to_string())]);
    let report = r.unwrap();
    assert_eq!(report.declarations, 4);
    assert_eq!(report.kernels_found, 3);
    assert_eq!(report.placeholders, 3);
    assert_eq!(report.compiled + report.cache_hits + report.up_to_date, 0);
    let warnings: Vec<&String> = lines
        .iter()
        .filter(|l| l.starts_with("cargo:warning="))
        .collect();
    assert_eq!(warnings.len(), 1, "{lines:#?}");
    assert!(
        warnings[0].contains("NVRTC") && warnings[0].contains("install-cuda-toolchain.sh"),
        "{}",
        warnings[0]
    );
    for key in [
        "NVCC",
        "CUDA_HOME",
        "CUDA_PATH",
        "HUMMING_CUDA_ARCHS",
        "HUMMING_REQUIRE_NVCC",
        "HUMMING_CACHE_DIR",
        "CI",
    ] {
        assert!(
            lines.contains(&format!("cargo:rerun-if-env-changed={key}")),
            "{key}"
        );
    }
    for p in ["src", "src/lib.rs", "tests", "tests/t.rs"] {
        assert!(
            lines.contains(&format!("cargo:rerun-if-changed={}", t.0.join(p).display())),
            "{p}"
        );
    }
    let dir = out.join("humming");
    for k in &report.kernels {
        assert_eq!(k.status, KernelStatus::Placeholder);
        assert_eq!(
            fs::metadata(dir.join(format!("{}.fatbin", k.hash)))
                .unwrap()
                .len(),
            0
        );
        let cu = fs::read_to_string(dir.join(format!("{}.cu", k.hash))).unwrap();
        assert!(cu.contains("#include \"humming/gemm.cuh\""));
    }
    assert_eq!(report.kernels[0].names, ["A", "SameAsA"]);
    for (rel, contents) in headers() {
        assert_eq!(
            fs::read_to_string(dir.join("include").join(rel)).unwrap(),
            *contents
        );
    }
    let text = fs::read_to_string(dir.join("build-report.txt")).unwrap();
    assert!(
        text.contains("kernels found: 3") && text.contains("placeholders"),
        "{text}"
    );

    // Required: the same build fails with a clear message.
    for vars in [
        vec![("CI", "true".to_string())],
        vec![("HUMMING_REQUIRE_NVCC", "1".to_string())],
    ] {
        let mut vars = vars;
        vars.push(("OUT_DIR", out.display().to_string()));
        let e = run(&config, vars).0.unwrap_err();
        assert!(matches!(e, Error::NvccMissing(_)), "{e}");
        assert!(e.to_string().contains("install-cuda-toolchain.sh"), "{e}");
    }
    let e = run(
        &config.clone().require_nvcc(true),
        vec![("OUT_DIR", out.display().to_string())],
    )
    .0
    .unwrap_err();
    assert!(e.to_string().contains("Config::require_nvcc"), "{e}");
    // HUMMING_REQUIRE_NVCC=0 wins over CI.
    let vars = vec![
        ("CI", "true".into()),
        ("HUMMING_REQUIRE_NVCC", "0".into()),
        ("OUT_DIR", out.display().to_string()),
    ];
    assert_eq!(run(&config, vars).0.unwrap().placeholders, 3);
}

#[test]
fn no_kernels_needs_no_nvcc() {
    let t = TempDir::new("nokernels");
    t.write("src/lib.rs", "pub fn f() {}\n");
    let out = t.0.join("out");
    let config = Config::new().root(&t.0).nvcc(t.0.join("no/such/nvcc"));
    let (r, lines) = run(
        &config,
        vec![
            ("OUT_DIR", out.display().to_string()),
            ("CI", "true".into()),
        ],
    );
    let report = r.unwrap();
    assert_eq!(report.kernels_found, 0);
    assert!(
        !lines.iter().any(|l| l.starts_with("cargo:warning")),
        "{lines:#?}"
    );
    assert!(out.join("humming/build-report.txt").is_file());
}

#[test]
fn bad_arch_list_is_an_error() {
    let t = TempDir::new("badarch");
    t.write("src/lib.rs", &kernel("gemm", "A", "u4"));
    let vars = vec![
        ("OUT_DIR", t.0.join("out").display().to_string()),
        ("HUMMING_CUDA_ARCHS", "sm90a".into()),
    ];
    let e = run(&Config::new().root(&t.0).nvcc("/no/nvcc"), vars)
        .0
        .unwrap_err();
    assert!(matches!(e, Error::BadArchs { .. }), "{e}");
    assert!(e.to_string().contains("sm90a"), "{e}");
}

/// The NVCC for the end-to-end test: the usual lookup, then the folder where
/// `scripts/install-cuda-toolchain.sh` installs one.
fn test_nvcc() -> Option<PathBuf> {
    if let Some((p, _)) = nvcc::find_nvcc_in_env().found {
        return Some(p);
    }
    let dir = std::env::var_os("HUMMING_TOOLCHAIN_DIR")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .map(|h| PathBuf::from(h).join(".cache/humming/toolchain/cuda-13.0.88"))
        })?;
    let lib = dir.join("venv/lib");
    let mut pythons: Vec<PathBuf> = fs::read_dir(&lib)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    pythons.sort();
    pythons
        .into_iter()
        .map(|p| p.join("site-packages/nvidia/cu13/bin/nvcc"))
        .find(|p| p.is_file())
}

#[test]
fn end_to_end_with_nvcc_and_cache() {
    let Some(nvcc) = test_nvcc() else {
        // Written to the real standard error (not `eprintln!`, which the test harness captures), so
        // the skip shows in a plain `cargo test`.
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "\nSKIPPED humming-build end_to_end_with_nvcc_and_cache: no NVCC found (set NVCC or \
             CUDA_HOME, e.g. CUDA_HOME=$(scripts/install-cuda-toolchain.sh))"
        );
        return;
    };
    eprintln!("end_to_end_with_nvcc_and_cache: using {}", nvcc.display());
    let t = TempDir::new("e2e");
    t.write(
        "src/lib.rs",
        "humming::gemm! {\n    pub kernel Small {\n        a: f16, b: u4, scale: group(128, f16), arch: [sm_80, sm_90a],\n        \
         tiles: [tile(block = (16, 64, 64), warp = (16, 64, 64), stages = 2)],\n    }\n}\n",
    );
    let cache = t.0.join("cache");
    let config = Config::new()
        .root(&t.0)
        .nvcc(&nvcc)
        .cache_dir(&cache)
        .archs([Arch::Sm90a])
        .jobs(2);
    let out = |n: &str| vec![("OUT_DIR", t.0.join(n).display().to_string())];

    // 1. Compiled by NVCC.
    let (r, lines) = run(&config, out("out1"));
    let report = r.unwrap_or_else(|e| panic!("{e}"));
    eprintln!("first build: {:.2} s", report.seconds);
    assert_eq!(
        (report.kernels_found, report.compiled),
        (1, 1),
        "{lines:#?}"
    );
    assert!(
        !lines.iter().any(|l| l.starts_with("cargo:warning")),
        "{lines:#?}"
    );
    assert_eq!(report.kernels[0].archs, [Arch::Sm90a]);
    let hash = &report.kernels[0].hash;
    let dir1 = t.0.join("out1/humming");
    let fatbin = fs::read(dir1.join(format!("{hash}.fatbin"))).unwrap();
    assert!(fatbin.len() > 1000, "fatbin of {} bytes", fatbin.len());
    let log = fs::read_to_string(dir1.join(format!("{hash}.ptxas.log"))).unwrap();
    assert!(log.contains("ptxas") && log.contains("sm_90a"), "{log}");
    assert!(
        !log.contains("sm_80"),
        "HUMMING_CUDA_ARCHS/Config::archs restricts the archs: {log}"
    );
    assert!(
        report
            .nvcc_version
            .as_deref()
            .unwrap_or("")
            .contains("release"),
        "{report:?}"
    );

    // 2. A fresh OUT_DIR: copied from the cache.
    let (r, _) = run(&config, out("out2"));
    let report = r.unwrap();
    eprintln!("cached build: {:.3} s", report.seconds);
    assert_eq!((report.compiled, report.cache_hits), (0, 1));
    assert_eq!(
        fs::read(t.0.join(format!("out2/humming/{hash}.fatbin"))).unwrap(),
        fatbin
    );
    assert_eq!(
        fs::read_to_string(t.0.join(format!("out2/humming/{hash}.ptxas.log"))).unwrap(),
        log
    );
    let text = fs::read_to_string(t.0.join("out2/humming/build-report.txt")).unwrap();
    assert!(text.contains("cache hits: 1"), "{text}");

    // 3. The same OUT_DIR again: nothing to do.
    let (r, _) = run(&config, out("out1"));
    assert_eq!(r.unwrap().up_to_date, 1);

    // 4. The environment restricts archs too; sm_80 only leaves nothing for sm_90a-only configs.
    let vars = vec![
        ("OUT_DIR", t.0.join("out3").display().to_string()),
        ("HUMMING_CUDA_ARCHS", "sm_80".into()),
    ];
    let (r, lines) = run(&config, vars);
    assert_eq!(r.unwrap().placeholders, 1);
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("cargo:warning") && l.contains("Small")),
        "{lines:#?}"
    );

    // 5. An NVCC failure fails the build and shows the source path and NVCC's output.
    let bad = config.clone().cache(false).flag("--no-such-nvcc-flag");
    let (r, _) = run(&bad, out("out4"));
    let e = r.unwrap_err();
    let text = e.to_string();
    assert!(
        matches!(e, Error::NvccFailed(ref f) if f.len() == 1),
        "{text}"
    );
    assert!(
        text.contains(&format!("{hash}.cu")) && text.contains("no-such-nvcc-flag"),
        "{text}"
    );
    assert!(
        !t.0.join(format!("out4/humming/{hash}.fatbin")).exists(),
        "no partial fatbin"
    );
}

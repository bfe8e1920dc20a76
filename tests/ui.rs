//! Compile-fail snapshots of `gemm!`'s diagnostics (one mistake per file in `tests/ui/`).
//!
//! The snapshots hold only the macro's own messages, which do not change with rustc, but the
//! surrounding rendering does; they are pinned to the workspace's toolchain. Refresh them with
//! `TRYBUILD=overwrite cargo test --test ui` and review the diff.

#[rustversion::attr(not(stable(1.95)), ignore = "UI snapshots are pinned to rustc 1.95")]
#[cfg_attr(miri, ignore)]
#[test]
fn ui() {
    // Cargo runs this test with this package's OUT_DIR set, and trybuild's cargo and rustc inherit
    // it, so `gemm!` in the cases would find the fatbins this package's build script compiled (it
    // scans tests/). Remove it: the cases then see what a crate without a build script sees, and the
    // snapshots do not depend on the build script or on NVCC.
    // SAFETY: this is the only test of this binary, and nothing else in it reads the environment.
    unsafe { std::env::remove_var("OUT_DIR") };
    trybuild::TestCases::new().compile_fail("tests/ui/*.rs");

    // A crate whose build script ran but did not compile the declaration: an empty OUT_DIR.
    let empty = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("humming-ui-empty-out-dir");
    std::fs::create_dir_all(&empty).unwrap();
    // SAFETY: as above; the first cases have finished (trybuild runs them when `TestCases` drops).
    unsafe { std::env::set_var("OUT_DIR", &empty) };
    trybuild::TestCases::new().compile_fail("tests/ui/missing_fatbin/*.rs");
}

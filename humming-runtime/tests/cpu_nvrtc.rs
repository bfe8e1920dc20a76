//! Run-time compilation (the NVRTC fallback) needs libnvrtc but no GPU: when libnvrtc can be loaded
//! (scripts/test.sh puts the pinned toolchain's lib folder on LD_LIBRARY_PATH), every generated
//! source must compile to a cubin for sm_80 and sm_90a, and a broken source must give a typed error
//! with NVRTC's log.

use humming_runtime::Error;
use humming_runtime::cuda::nvrtc_compile;
use humming_runtime::spec::{codegen::generate_cuda, parse_kernel_str};
use std::io::Write;

fn nvrtc_present() -> bool {
    // SAFETY: only tries to dlopen libnvrtc.
    let present = unsafe { cudarc::nvrtc::sys::is_culib_present() };
    if !present {
        let _ = writeln!(
            std::io::stderr(),
            "skipped: cpu_nvrtc (libnvrtc not found on LD_LIBRARY_PATH)"
        );
    }
    present
}

#[test]
fn generated_sources_compile_to_cubins() {
    if !nvrtc_present() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("humming-nvrtc-test-{}", std::process::id()));
    // SAFETY: set before any other thread of this test binary reads it (single test in this file
    // touching the variable).
    unsafe { std::env::set_var("HUMMING_CACHE_DIR", &dir) };
    for fields in [
        "a: f16, b: u3, scale: group(32), zero_point: int, bias: true",
        "a: bf16, b: i8, scale: channel, epilogue: silu",
        // W4A16: its staged wgmma tiles compile the atomic split-K path (Gemm::kAtomicC).
        "a: f16, b: i4, scale: group(128)",
        // An 8-row tile whose staged f32 tile (8 x 260 floats) does not fit its 6 KiB of shared
        // memory: no atomic split-K, on both sides of the static_assert that compares them.
        "a: f16, b: u1, scale: channel, tiles: [tile(block = (8, 256, 64), warp = (8, 64, 64), stages = 2, mma = sync)]",
    ] {
        let spec = parse_kernel_str(fields).unwrap();
        let src = generate_cuda(&spec);
        for cap in [80, 90] {
            let t = std::time::Instant::now();
            let cubin = nvrtc_compile("test", &src, cap)
                .unwrap_or_else(|e| panic!("{fields} sm_{cap}: {e}"));
            assert_eq!(
                &cubin[..4],
                b"\x7fELF",
                "{fields} sm_{cap}: not an ELF cubin"
            );
            let first = t.elapsed();
            // Second time: from the disk cache, identical bytes.
            let t = std::time::Instant::now();
            assert_eq!(nvrtc_compile("test", &src, cap).unwrap(), cubin);
            assert!(t.elapsed() < first, "the cache was not used");
        }
    }
    let broken = "extern \"C\" __global__ void k() { this is not C++; }";
    match nvrtc_compile("broken", broken, 90) {
        Err(Error::Nvrtc { kernel, msg }) => {
            assert_eq!(kernel, "broken");
            assert!(msg.contains("error"), "no compiler log in: {msg}");
        }
        other => panic!("expected an NVRTC error, got {other:?}"),
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Several threads of one process compiling the same source at once (as the GPU tests' threads do
/// when two of them load the same kernel) must each get the cubin: no thread may see another's
/// header files half-written or already removed.
#[test]
fn concurrent_compilations_of_one_source() {
    if !nvrtc_present() {
        return;
    }
    // A source no cache holds yet (a comment with this process's id), so that every thread compiles
    // it rather than reading another's cubin.
    let spec = parse_kernel_str("a: f16, b: u4, scale: channel").unwrap();
    let src = format!(
        "// concurrent_compilations_of_one_source {}\n{}",
        std::process::id(),
        generate_cuda(&spec)
    );
    let threads: Vec<_> = (0..4)
        .map(|i| {
            let src = src.clone();
            std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(10 * i));
                nvrtc_compile("concurrent", &src, 80)
            })
        })
        .collect();
    let cubins: Vec<Vec<u8>> = threads
        .into_iter()
        .enumerate()
        .map(|(i, t)| {
            t.join()
                .unwrap()
                .unwrap_or_else(|e| panic!("thread {i}: {e}"))
        })
        .collect();
    for (i, c) in cubins.iter().enumerate() {
        assert_eq!(&c[..4], b"\x7fELF", "thread {i}: not an ELF cubin");
    }
}

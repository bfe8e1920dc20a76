humming::gemm! {
    pub kernel W {
        a: e4m3, b: i4, c: f16, scale: group(128, f16), arch: [sm_90a],
        tiles: [tile(block = (128, 128, 128), warp = (128, 32, 64), stages = 4, mma = wgmma)],
    }
}

fn main() {}

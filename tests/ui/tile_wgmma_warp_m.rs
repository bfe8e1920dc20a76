humming::gemm! {
    pub kernel W {
        a: f16,
        b: u4,
        arch: [sm_90a],
        tiles: [tile(block = (64, 128, 64), warp = (32, 32, 64), stages = 4, mma = wgmma)],
    }
}

fn main() {}

humming::gemm! {
    pub kernel W {
        a: f16,
        b: u4,
        arch: [sm_90a],
        tiles: [tile(block = (128, 128, 64), stages = 2, mma = wgmma)],
    }
}

fn main() {}

humming::gemm! {
    pub kernel W {
        a: f16, b: u4, scale: group(128, f16), arch: [sm_90a],
        tiles: [tile(block = (128, 256, 128), stages = 4, mma = wgmma_ss)],
    }
}

fn main() {}

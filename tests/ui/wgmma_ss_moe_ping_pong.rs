humming::gemm! {
    pub kernel W {
        a: e4m3, b: u4, c: f16, scale: group(128, f16), layout: moe_indexed, arch: [sm_90a],
        tiles: [tile(block = (64, 128, 128), warp = (64, 128, 128), stages = 4, mma = wgmma_ss)],
    }
}

fn main() {}

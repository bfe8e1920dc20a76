humming::gemm! {
    pub kernel W {
        a: f16,
        b: u4,
        layout: moe_indexed,
        arch: [sm_90a],
        tiles: [tile(block = (64, 128, 128), stages = 4, mma = wgmma)],
    }
}

fn main() {}

humming::gemm! {
    pub kernel W {
        a: f16,
        b: u4,
        tiles: [tile(block = (128, 128, 64), stages = 4, mma = wgmma)],
    }
}

fn main() {}

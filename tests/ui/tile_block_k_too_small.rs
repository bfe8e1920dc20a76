humming::gemm! {
    pub kernel W {
        a: f16,
        b: u4,
        tiles: [
            tile(block = (16, 128, 64), warp = (16, 64, 64), stages = 4),
            tile(block = (16, 128, 16), warp = (16, 64, 16)),
        ],
    }
}

fn main() {}

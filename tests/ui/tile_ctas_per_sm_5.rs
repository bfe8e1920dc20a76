humming::gemm! {
    pub kernel W {
        a: f16,
        b: u4,
        tiles: [tile(block = (8, 128, 64), warp = (8, 64, 64), stages = 4, ctas_per_sm = 5)],
    }
}

fn main() {}

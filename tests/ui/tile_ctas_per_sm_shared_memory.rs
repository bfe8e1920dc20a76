humming::gemm! {
    pub kernel W {
        a: f16,
        b: u4,
        scale: group(128),
        tiles: [tile(block = (8, 128, 128), warp = (8, 64, 64), stages = 6, ctas_per_sm = 4)],
    }
}

fn main() {}

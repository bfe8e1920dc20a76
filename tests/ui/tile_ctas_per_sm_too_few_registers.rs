humming::gemm! {
    pub kernel W {
        a: f16,
        b: u4,
        arch: [sm_90a],
        tiles: [
            tile(block = (16, 128, 256), warp = (16, 64, 64), stages = 3, ctas_per_sm = 2),
            tile(block = (32, 128, 256), warp = (32, 64, 64), stages = 3, ctas_per_sm = 2),
        ],
    }
}

fn main() {}

humming::gemm! {
    pub kernel W {
        a: f16,
        b: u4,
        tiles: [tile(block = (64, 256, 128), mma = hgmma)],
    }
}

fn main() {}

humming::gemm! {
    pub kernel W {
        a: f16,
        b: u4,
        arch: [sm_80],
        tiles: [tile(block = (64, 256, 128), mma = wgmma)],
    }
}

fn main() {}

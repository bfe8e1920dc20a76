humming::gemm! {
    pub kernel W {
        a: e4m3, b: e4m3, c: bf16, scale: block(128, 128, f32), arch: [sm_90a],
        tiles: [tile(block = (256, 128, 128), stages = 3, mma = wgmma_ss)],
    }
}

fn main() {}

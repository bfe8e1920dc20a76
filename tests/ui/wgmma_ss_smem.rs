humming::gemm! {
    pub kernel W {
        a: e4m3, b: e4m3, c: bf16, scale: channel(f32), arch: [sm_90a],
        tiles: [tile(block = (128, 256, 128), stages = 6, mma = wgmma_ss)],
    }
}

fn main() {}

humming::gemm! {
    pub kernel W {
        a: e4m3, b: e4m3, c: bf16, scale: channel(f32), arch: [sm_89],
        tiles: [tile(block = (16, 128, 128), stages = 8, mma = wgmma_ss), tile(block = (16, 128, 256), warp = (16, 64, 64), stages = 3)],
    }
}

fn main() {}

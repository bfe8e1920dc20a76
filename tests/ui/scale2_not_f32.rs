humming::gemm! {
    pub kernel W { a: f16, b: e2m1, scale: group(16, e4m3), scale2: tensor(f16) }
}

fn main() {}

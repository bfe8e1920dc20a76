humming::gemm! {
    pub kernel W { a: f16, b: e4m3, scale: tensor(f16) }
}

fn main() {}

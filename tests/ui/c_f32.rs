humming::gemm! {
    pub kernel W { a: f16, b: u4, c: f32 }
}

fn main() {}

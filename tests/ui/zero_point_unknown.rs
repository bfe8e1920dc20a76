humming::gemm! {
    pub kernel W { a: f16, b: u4, zero_point: yes }
}

fn main() {}

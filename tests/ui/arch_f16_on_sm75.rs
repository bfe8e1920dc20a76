humming::gemm! {
    pub kernel W { a: f16, b: u4, arch: [sm_75, sm_80] }
}

fn main() {}

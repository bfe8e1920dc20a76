humming::gemm! {
    pub kernel W { a: f16, b: u4, arch: [sm_80, sm_91] }
}

fn main() {}

humming::gemm! {
    pub kernel W { a: e4m3, b: i4, c: bf16, scale: group(128, bf16), layout: moe_indexed, arch: [sm_90a] }
}

fn main() {}

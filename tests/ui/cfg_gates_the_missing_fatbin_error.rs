// Valid kernels; only the one compiled in reports the missing fatbin.
humming::gemm! {
    #[cfg(any())]
    pub kernel Off { a: f16, b: u4 }

    #[cfg(all())]
    pub kernel On { a: bf16, b: u4 }
}

fn main() {}

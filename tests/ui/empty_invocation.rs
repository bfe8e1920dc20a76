humming::gemm! {}

fn main() {}

//! What the spec test files share: a declaration parsed or refused.

use humming_spec::{KernelSpec, parse_kernel_str};

/// The kernel `fields` declare; panics with the refusal where they are refused.
pub fn spec(fields: &str) -> KernelSpec {
    parse_kernel_str(fields).unwrap_or_else(|e| panic!("{fields}: {e}"))
}

/// The refusal of `fields`; panics where they are accepted.
pub fn err(fields: &str) -> String {
    match parse_kernel_str(fields) {
        Ok(s) => panic!("{fields} was accepted as {s}"),
        Err(e) => e.to_string(),
    }
}

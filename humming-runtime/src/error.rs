//! The runtime's error type.

/// Everything that can go wrong when preparing weights or launching a kernel.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A shape or argument is invalid. `arg` names the offending argument.
    #[error("invalid argument `{arg}`: {msg}")]
    InvalidArgument {
        /// The argument's name (`m`, `k`, `a`, `weights`, ...).
        arg: &'static str,
        /// What is wrong, with the value and the rule.
        msg: String,
    },
    /// No CUDA driver (`libcuda.so`) could be loaded on this machine.
    #[error(
        "no CUDA driver: libcuda.so could not be loaded (is an NVIDIA GPU and driver present?)"
    )]
    NoCudaDriver,
    /// The CUDA driver reported an error.
    #[error("CUDA driver error in {context}: {source}")]
    Driver {
        /// What was being done.
        context: String,
        /// The driver's error.
        #[source]
        source: cudarc::driver::DriverError,
    },
    /// Run-time compilation (NVRTC) failed or is unavailable.
    #[error("NVRTC compilation of {kernel} failed: {msg}")]
    Nvrtc {
        /// Kernel name.
        kernel: String,
        /// The compiler's message or log.
        msg: String,
    },
    /// The kernel's image does not run on this device.
    #[error(
        "kernel {kernel} is not built for this device (compute capability {capability}); declared targets: {archs}"
    )]
    UnsupportedDevice {
        /// Kernel name.
        kernel: String,
        /// major * 10 + minor.
        capability: u32,
        /// Declared archs.
        archs: String,
    },
    /// A file could not be read or written (kernel cache, model files).
    #[error("I/O error on {path}: {source}")]
    Io {
        /// The path.
        path: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

/// `Result` with [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

pub(crate) fn invalid(arg: &'static str, msg: impl Into<String>) -> Error {
    Error::InvalidArgument {
        arg,
        msg: msg.into(),
    }
}

//! The bytes of a model file: memory-mapped from disk, or owned.

use crate::error::{Error, Result};
use std::path::Path;

/// A read-only byte buffer holding a whole file.
pub(crate) enum FileBytes {
    /// A read-only memory map of the file.
    Mapped(memmap2::Mmap),
    /// Bytes held in memory (files built in memory, empty files).
    Owned(Vec<u8>),
}

impl FileBytes {
    /// Memory-maps `path` read-only.
    pub(crate) fn map(path: &Path) -> Result<Self> {
        let io = |source| Error::Io {
            path: path.display().to_string(),
            source,
        };
        let file = std::fs::File::open(path).map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        if len == 0 {
            // Mapping an empty file fails on some platforms.
            return Ok(FileBytes::Owned(Vec::new()));
        }
        // SAFETY: the map is read-only and private to this value. As with every memory-mapped
        // reader, the file must not be truncated or rewritten by another process while it is open
        // (documented on the public `open` functions).
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(io)?;
        Ok(FileBytes::Mapped(map))
    }

    /// The bytes.
    pub(crate) fn as_slice(&self) -> &[u8] {
        match self {
            FileBytes::Mapped(m) => m,
            FileBytes::Owned(v) => v,
        }
    }
}

impl std::fmt::Debug for FileBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self {
            FileBytes::Mapped(_) => "mapped",
            FileBytes::Owned(_) => "owned",
        };
        write!(f, "FileBytes({kind}, {} bytes)", self.as_slice().len())
    }
}

//! A reader of GGUF files, the model format of ggml and llama.cpp.
//!
//! Format (ggml's `docs/gguf.md` and `ggml/src/gguf.cpp`), all little-endian:
//! - header: magic `GGUF`, `u32` version (2 or 3 here; version 1 used 32-bit counts and is not
//!   read), `u64` tensor count, `u64` metadata key/value count;
//! - metadata: per entry a string key, a `u32` value type and the value. Strings are a `u64` byte
//!   length and UTF-8 bytes (no terminator); arrays are a `u32` element type, a `u64` count and the
//!   elements (arrays may nest);
//! - tensor infos: per tensor a string name, `u32` dimension count (1..=4), `u64` dimensions with
//!   the row length `ne0` first, `u32` GGML type and a `u64` offset into the data section;
//! - padding up to `general.alignment` (default 32), then the data section. Every tensor's offset is
//!   a multiple of the alignment.
//!
//! Big-endian GGUF files are detected and rejected with [`Error::Format`].
//!
//! [`GgufFile::open`] memory-maps the file and parses only the header, metadata and tensor table
//! (a 100 MB model opens in milliseconds); tensor bytes are borrowed from the map.

use crate::bytes::FileBytes;
use crate::error::{Error, Result};
use std::collections::HashMap;
use std::path::Path;

pub use crate::ggml_type::GgmlType;

/// The magic bytes every GGUF file starts with.
pub const GGUF_MAGIC: [u8; 4] = *b"GGUF";
/// Alignment of the data section and of every tensor when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u64 = 32;
/// The largest dimension count of a ggml tensor (`GGML_MAX_DIMS`).
pub const MAX_DIMS: usize = 4;

/// A GGUF metadata value (`enum gguf_type`: value types 0..=12).
#[derive(Clone, Debug, PartialEq)]
pub enum MetaValue {
    /// Type 0.
    U8(u8),
    /// Type 1.
    I8(i8),
    /// Type 2.
    U16(u16),
    /// Type 3.
    I16(i16),
    /// Type 4.
    U32(u32),
    /// Type 5.
    I32(i32),
    /// Type 6.
    F32(f32),
    /// Type 7 (one byte, 0 or 1; other bytes are rejected).
    Bool(bool),
    /// Type 8 (invalid UTF-8 is replaced by U+FFFD).
    String(String),
    /// Type 9: elements of one type (possibly arrays themselves).
    Array(Vec<MetaValue>),
    /// Type 10.
    U64(u64),
    /// Type 11.
    I64(i64),
    /// Type 12.
    F64(f64),
}

impl MetaValue {
    /// The value as an unsigned integer: any integer type holding a value `>= 0`.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            MetaValue::U8(v) => Some(v.into()),
            MetaValue::U16(v) => Some(v.into()),
            MetaValue::U32(v) => Some(v.into()),
            MetaValue::U64(v) => Some(v),
            MetaValue::I8(v) => u64::try_from(v).ok(),
            MetaValue::I16(v) => u64::try_from(v).ok(),
            MetaValue::I32(v) => u64::try_from(v).ok(),
            MetaValue::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// The value as a signed integer: any integer type whose value fits in `i64`.
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            MetaValue::I8(v) => Some(v.into()),
            MetaValue::I16(v) => Some(v.into()),
            MetaValue::I32(v) => Some(v.into()),
            MetaValue::I64(v) => Some(v),
            MetaValue::U8(v) => Some(v.into()),
            MetaValue::U16(v) => Some(v.into()),
            MetaValue::U32(v) => Some(v.into()),
            MetaValue::U64(v) => i64::try_from(v).ok(),
            _ => None,
        }
    }

    /// The value as a float: `f32` or `f64` (exactly), or an integer (rounded to nearest for
    /// magnitudes above 2^53).
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            MetaValue::F32(v) => Some(v.into()),
            MetaValue::F64(v) => Some(v),
            _ => self
                .as_i64()
                .map(|v| v as f64)
                .or_else(|| self.as_u64().map(|v| v as f64)),
        }
    }

    /// The string, for [`MetaValue::String`].
    pub fn as_str(&self) -> Option<&str> {
        match self {
            MetaValue::String(s) => Some(s),
            _ => None,
        }
    }

    /// The boolean, for [`MetaValue::Bool`].
    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            MetaValue::Bool(b) => Some(b),
            _ => None,
        }
    }

    /// The elements, for [`MetaValue::Array`].
    pub fn as_array(&self) -> Option<&[MetaValue]> {
        match self {
            MetaValue::Array(a) => Some(a),
            _ => None,
        }
    }

    /// A short description for error messages: the type and the value (arrays: type and length;
    /// strings cut at 40 characters).
    pub fn describe(&self) -> String {
        match self {
            MetaValue::U8(v) => format!("u8 {v}"),
            MetaValue::I8(v) => format!("i8 {v}"),
            MetaValue::U16(v) => format!("u16 {v}"),
            MetaValue::I16(v) => format!("i16 {v}"),
            MetaValue::U32(v) => format!("u32 {v}"),
            MetaValue::I32(v) => format!("i32 {v}"),
            MetaValue::F32(v) => format!("f32 {v}"),
            MetaValue::Bool(v) => format!("bool {v}"),
            MetaValue::String(s) => {
                let cut: String = s.chars().take(40).collect();
                let more = if cut.len() < s.len() { "..." } else { "" };
                format!("string {cut:?}{more}")
            }
            MetaValue::Array(a) => format!("an array of {} elements", a.len()),
            MetaValue::U64(v) => format!("u64 {v}"),
            MetaValue::I64(v) => format!("i64 {v}"),
            MetaValue::F64(v) => format!("f64 {v}"),
        }
    }
}

/// One entry of a GGUF file's tensor table.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorInfo {
    /// The tensor's name, e.g. `blk.0.attn_q.weight`.
    pub name: String,
    /// Its element type.
    pub ggml_type: GgmlType,
    /// Dimensions as GGUF stores them: the row length `ne0` first (`[K, N]` for a weight matrix of
    /// N output features by K input features). 1 to 4 entries.
    pub dims: Vec<u64>,
    /// Byte offset of the data from the start of the data section (a multiple of the alignment).
    pub offset: u64,
    /// Byte length of the data; `None` if the type is unknown ([`GgmlType::Other`]).
    pub n_bytes: Option<u64>,
}

impl TensorInfo {
    /// The number of elements: the product of the dimensions.
    pub fn n_elements(&self) -> u64 {
        self.dims.iter().product()
    }

    /// `(N, K)` of the tensor read as a row-major matrix of N rows of K elements: `K = ne0`,
    /// `N = ne1` (1 for a vector). `None` if a dimension past the second is not 1.
    pub fn matrix_nk(&self) -> Option<(usize, usize)> {
        if self.dims.iter().skip(2).any(|&d| d != 1) {
            return None;
        }
        let k = usize::try_from(*self.dims.first()?).ok()?;
        let n = usize::try_from(self.dims.get(1).copied().unwrap_or(1)).ok()?;
        Some((n, k))
    }
}

/// A tensor of an open [`GgufFile`]: its table entry and its bytes (borrowed from the file).
#[derive(Clone, Copy, Debug)]
pub struct GgufTensor<'a> {
    info: &'a TensorInfo,
    data: &'a [u8],
}

impl<'a> GgufTensor<'a> {
    /// Its table entry.
    pub fn info(&self) -> &'a TensorInfo {
        self.info
    }
    /// Its name.
    pub fn name(&self) -> &'a str {
        &self.info.name
    }
    /// Its GGML type.
    pub fn ggml_type(&self) -> GgmlType {
        self.info.ggml_type
    }
    /// Its dimensions, row length first (see [`TensorInfo::dims`]).
    pub fn dims(&self) -> &'a [u64] {
        &self.info.dims
    }
    /// Its raw bytes in the file (ggml blocks, or little-endian elements for plain types).
    pub fn bytes(&self) -> &'a [u8] {
        self.data
    }

    /// The elements as f32, in file order (row-major `[N, K]` for a matrix), for F32, F16 and BF16
    /// tensors (exact conversions).
    ///
    /// # Errors
    /// [`Error::UnsupportedTensorType`] for any other type (use
    /// [`crate::ggml::ggml_dequantize`] for quantized blocks).
    pub fn to_f32(&self) -> Result<Vec<f32>> {
        let named = |e: Error| match e {
            Error::UnsupportedTensorType { ty, .. } => Error::UnsupportedTensorType {
                tensor: self.name().to_owned(),
                ty,
                supported: "F32, F16, BF16",
            },
            other => other,
        };
        match self.ggml_type() {
            GgmlType::F32 | GgmlType::F16 | GgmlType::BF16 => crate::ggml::ggml_dequantize(
                self.ggml_type(),
                self.data,
                self.info.n_elements() as usize,
            )
            .map_err(named),
            ty => Err(named(Error::UnsupportedTensorType {
                tensor: String::new(),
                ty,
                supported: "",
            })),
        }
    }
}

/// An open GGUF file: header, metadata and tensor table parsed; tensor data borrowed on demand.
#[derive(Debug)]
pub struct GgufFile {
    bytes: FileBytes,
    version: u32,
    alignment: u64,
    data_offset: u64,
    metadata: Vec<(String, MetaValue)>,
    meta_index: HashMap<String, usize>,
    tensors: Vec<TensorInfo>,
    tensor_index: HashMap<String, usize>,
}

impl GgufFile {
    /// Opens and parses the GGUF file at `path` (memory-mapped, read-only). The file must not be
    /// modified or truncated while the returned value lives.
    ///
    /// # Errors
    /// [`Error::Io`] if the file cannot be opened or mapped; [`Error::Format`] if it is not a valid
    /// little-endian GGUF v2/v3 file (see [`GgufFile::from_bytes`] for what is checked).
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        Self::parse(FileBytes::map(path.as_ref())?)
    }

    /// Parses a GGUF file held in memory.
    ///
    /// Checked: magic, version (2 or 3), that every string, array and table entry lies inside the
    /// buffer, value types, unique keys and tensor names, `general.alignment` (an unsigned integer,
    /// a non-zero power of two), dimension counts (1..=4), row lengths that are whole blocks, tensor
    /// offsets that are aligned, and tensor data inside the data section.
    ///
    /// # Errors
    /// [`Error::Format`] naming the byte offset and the problem.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<Self> {
        Self::parse(FileBytes::Owned(bytes))
    }

    fn parse(bytes: FileBytes) -> Result<Self> {
        let buf = bytes.as_slice();
        let mut r = Reader { buf, pos: 0 };
        let magic = r.take(4, "the magic")?;
        if magic != GGUF_MAGIC {
            return Err(format_err(
                0,
                format!("bad magic {magic:02x?}; expected \"GGUF\" (47 47 55 46)"),
            ));
        }
        let version = r.u32("the version")?;
        match version {
            2 | 3 => {}
            1 => {
                return Err(format_err(
                    4,
                    "GGUF version 1 (32-bit counts) is not supported; expected 2 or 3",
                ));
            }
            v if v.swap_bytes() == 2 || v.swap_bytes() == 3 => {
                return Err(format_err(4, "big-endian GGUF files are not supported"));
            }
            v => {
                return Err(format_err(
                    4,
                    format!("unsupported GGUF version {v}; expected 2 or 3"),
                ));
            }
        }
        let n_tensors = r.u64("the tensor count")?;
        let n_kv = r.u64("the metadata count")?;
        // Every entry takes at least 8 bytes: counts beyond the file are corrupt (and would make us
        // allocate without bound).
        r.check_count(n_kv, 8, "metadata entries")?;
        r.check_count(n_tensors, 8, "tensors")?;

        let mut metadata = Vec::with_capacity(n_kv as usize);
        let mut meta_index = HashMap::with_capacity(n_kv as usize);
        for _ in 0..n_kv {
            let at = r.pos;
            let key = r.string_utf8("a metadata key")?;
            let ty = r.u32("a metadata value type")?;
            let value = r.value(ty, 0)?;
            if meta_index.insert(key.clone(), metadata.len()).is_some() {
                return Err(format_err(
                    at as u64,
                    format!("duplicate metadata key `{key}`"),
                ));
            }
            metadata.push((key, value));
        }

        let alignment = match meta_index.get("general.alignment") {
            None => DEFAULT_ALIGNMENT,
            Some(&i) => {
                let v = &metadata[i].1;
                match v.as_u64() {
                    Some(a) if a.is_power_of_two() => a,
                    _ => {
                        return Err(format_err(
                            0,
                            format!(
                                "general.alignment is {}; expected a non-zero power of two",
                                v.describe()
                            ),
                        ));
                    }
                }
            }
        };

        let mut tensors = Vec::with_capacity(n_tensors as usize);
        let mut tensor_index = HashMap::with_capacity(n_tensors as usize);
        for _ in 0..n_tensors {
            let at = r.pos as u64;
            let name = r.string_utf8("a tensor name")?;
            let n_dims = r.u32("a dimension count")? as usize;
            if !(1..=MAX_DIMS).contains(&n_dims) {
                return Err(format_err(
                    at,
                    format!("tensor `{name}` has {n_dims} dimensions; expected 1..={MAX_DIMS}"),
                ));
            }
            let mut dims = Vec::with_capacity(n_dims);
            for _ in 0..n_dims {
                dims.push(r.u64("a dimension")?);
            }
            let raw_type = r.u32("a tensor type")?;
            let offset = r.u64("a tensor offset")?;
            let ggml_type = GgmlType::from_raw(raw_type);
            let n_elements = dims
                .iter()
                .try_fold(1u64, |acc, &d| acc.checked_mul(d))
                .filter(|&n| n <= i64::MAX as u64)
                .ok_or_else(|| {
                    format_err(
                        at,
                        format!("tensor `{name}`: the element count of {dims:?} overflows"),
                    )
                })?;
            let n_bytes = match ggml_type.block_layout() {
                None => None,
                Some((blk, _)) => {
                    if dims[0] % blk as u64 != 0 {
                        return Err(format_err(
                            at,
                            format!(
                                "tensor `{name}` of type {ggml_type}: row length {} is not a multiple of the block size {blk}",
                                dims[0]
                            ),
                        ));
                    }
                    Some(ggml_type.bytes_for(n_elements).ok_or_else(|| {
                        format_err(
                            at,
                            format!("tensor `{name}`: the byte size of {dims:?} overflows"),
                        )
                    })?)
                }
            };
            if offset % alignment != 0 {
                return Err(format_err(
                    at,
                    format!(
                        "tensor `{name}`: data offset {offset} is not a multiple of the alignment {alignment}"
                    ),
                ));
            }
            if tensor_index.insert(name.clone(), tensors.len()).is_some() {
                return Err(format_err(at, format!("duplicate tensor name `{name}`")));
            }
            tensors.push(TensorInfo {
                name,
                ggml_type,
                dims,
                offset,
                n_bytes,
            });
        }

        let data_offset = (r.pos as u64).next_multiple_of(alignment);
        let data_len = (buf.len() as u64).saturating_sub(data_offset);
        for t in &tensors {
            let end = t.offset.checked_add(t.n_bytes.unwrap_or(0));
            if end.is_none_or(|e| e > data_len) {
                return Err(format_err(
                    data_offset.saturating_add(t.offset),
                    format!(
                        "tensor `{}`: data [{}, {}) lies outside the data section of {data_len} bytes (file truncated?)",
                        t.name,
                        t.offset,
                        t.offset as u128 + t.n_bytes.unwrap_or(0) as u128
                    ),
                ));
            }
        }

        Ok(GgufFile {
            bytes,
            version,
            alignment,
            data_offset,
            metadata,
            meta_index,
            tensors,
            tensor_index,
        })
    }

    /// The GGUF version (2 or 3).
    pub fn version(&self) -> u32 {
        self.version
    }
    /// The alignment of the data section and of tensor offsets (`general.alignment`, default 32).
    pub fn alignment(&self) -> u64 {
        self.alignment
    }
    /// Byte offset of the data section in the file.
    pub fn data_offset(&self) -> u64 {
        self.data_offset
    }
    /// The whole file's bytes.
    pub fn file_bytes(&self) -> &[u8] {
        self.bytes.as_slice()
    }

    /// All metadata entries, in file order.
    pub fn metadata(&self) -> &[(String, MetaValue)] {
        &self.metadata
    }
    /// The value of metadata key `key`, if present.
    pub fn get(&self, key: &str) -> Option<&MetaValue> {
        self.meta_index.get(key).map(|&i| &self.metadata[i].1)
    }
    fn get_as<T>(
        &self,
        key: &str,
        expected: &'static str,
        f: impl Fn(&MetaValue) -> Option<T>,
    ) -> Result<T> {
        let v = self.get(key).ok_or_else(|| Error::MissingKey {
            key: key.to_owned(),
        })?;
        f(v).ok_or_else(|| Error::MetadataType {
            key: key.to_owned(),
            expected,
            found: v.describe(),
        })
    }
    /// The string value of `key`.
    ///
    /// # Errors
    /// [`Error::MissingKey`], or [`Error::MetadataType`] if the value is not a string.
    pub fn get_str(&self, key: &str) -> Result<&str> {
        let v = self.get(key).ok_or_else(|| Error::MissingKey {
            key: key.to_owned(),
        })?;
        v.as_str().ok_or_else(|| Error::MetadataType {
            key: key.to_owned(),
            expected: "a string",
            found: v.describe(),
        })
    }
    /// The value of `key` as an unsigned integer (see [`MetaValue::as_u64`]).
    ///
    /// # Errors
    /// [`Error::MissingKey`], or [`Error::MetadataType`] if the value is not a non-negative integer.
    pub fn get_u64(&self, key: &str) -> Result<u64> {
        self.get_as(key, "an unsigned integer", MetaValue::as_u64)
    }
    /// The value of `key` as an unsigned integer that fits in `usize` (dimensions, counts).
    ///
    /// # Errors
    /// As [`GgufFile::get_u64`], and [`Error::MetadataType`] if it does not fit in `usize`.
    pub fn get_usize(&self, key: &str) -> Result<usize> {
        self.get_as(key, "an unsigned integer that fits in usize", |v| {
            v.as_u64().and_then(|u| usize::try_from(u).ok())
        })
    }
    /// The value of `key` as a signed integer (see [`MetaValue::as_i64`]).
    ///
    /// # Errors
    /// [`Error::MissingKey`], or [`Error::MetadataType`] if the value is not an integer in `i64`.
    pub fn get_i64(&self, key: &str) -> Result<i64> {
        self.get_as(key, "a signed integer", MetaValue::as_i64)
    }
    /// The value of `key` as a float (see [`MetaValue::as_f64`]), e.g. `llama.rope.freq_base`.
    ///
    /// # Errors
    /// [`Error::MissingKey`], or [`Error::MetadataType`] if the value is not a number.
    pub fn get_f64(&self, key: &str) -> Result<f64> {
        self.get_as(key, "a number", MetaValue::as_f64)
    }
    /// The boolean value of `key`.
    ///
    /// # Errors
    /// [`Error::MissingKey`], or [`Error::MetadataType`] if the value is not a boolean.
    pub fn get_bool(&self, key: &str) -> Result<bool> {
        self.get_as(key, "a boolean", MetaValue::as_bool)
    }
    /// `general.architecture`, e.g. `llama`: the prefix of the model's hyper-parameter keys.
    ///
    /// # Errors
    /// As [`GgufFile::get_str`].
    pub fn architecture(&self) -> Result<&str> {
        self.get_str("general.architecture")
    }

    /// The tensor table, in file order.
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }
    /// The table entry of tensor `name`, if present.
    pub fn tensor_info(&self, name: &str) -> Option<&TensorInfo> {
        self.tensor_index.get(name).map(|&i| &self.tensors[i])
    }
    /// Tensor `name` with its bytes.
    ///
    /// # Errors
    /// [`Error::MissingTensor`]; [`Error::UnsupportedTensorType`] if its type is unknown to this
    /// crate (its byte size is then unknown).
    pub fn tensor(&self, name: &str) -> Result<GgufTensor<'_>> {
        let info = self.tensor_info(name).ok_or_else(|| Error::MissingTensor {
            name: name.to_owned(),
        })?;
        self.view(info)
    }
    /// Every tensor whose type is known, with its bytes, in file order.
    pub fn iter_tensors(&self) -> impl Iterator<Item = GgufTensor<'_>> {
        self.tensors.iter().filter_map(|t| self.view(t).ok())
    }
    fn view<'a>(&'a self, info: &'a TensorInfo) -> Result<GgufTensor<'a>> {
        let n = info.n_bytes.ok_or_else(|| Error::UnsupportedTensorType {
            tensor: info.name.clone(),
            ty: info.ggml_type,
            supported: "types of known size (every type of ggml.h up to MXFP4)",
        })?;
        // In bounds: checked by `parse`.
        let start = (self.data_offset + info.offset) as usize;
        Ok(GgufTensor {
            info,
            data: &self.bytes.as_slice()[start..start + n as usize],
        })
    }
    /// The raw bytes of tensor `name` (see [`GgufTensor::bytes`]).
    ///
    /// # Errors
    /// As [`GgufFile::tensor`].
    pub fn tensor_bytes(&self, name: &str) -> Result<&[u8]> {
        Ok(self.tensor(name)?.bytes())
    }
    /// The elements of an F32, F16 or BF16 tensor as f32 (see [`GgufTensor::to_f32`]).
    ///
    /// # Errors
    /// As [`GgufFile::tensor`] and [`GgufTensor::to_f32`].
    pub fn tensor_f32(&self, name: &str) -> Result<Vec<f32>> {
        self.tensor(name)?.to_f32()
    }
}

fn format_err(offset: u64, msg: impl Into<String>) -> Error {
    Error::Format {
        offset,
        msg: msg.into(),
    }
}

/// Arrays may nest; deeper nesting than this is treated as corrupt (ggml itself allows none).
const MAX_ARRAY_DEPTH: usize = 8;

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(format_err(
                self.pos as u64,
                format!(
                    "file ends while reading {what} ({n} bytes wanted, {} left)",
                    self.remaining()
                ),
            ));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        Ok(self.take(N, what)?.try_into().expect("length checked"))
    }
    fn u32(&mut self, what: &str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }
    fn u64(&mut self, what: &str) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }
    fn check_count(&self, count: u64, min_bytes: u64, what: &str) -> Result<()> {
        if count.saturating_mul(min_bytes) > self.remaining() as u64 {
            return Err(format_err(
                self.pos as u64,
                format!(
                    "{count} {what} cannot fit in the {} bytes left in the file",
                    self.remaining()
                ),
            ));
        }
        Ok(())
    }
    fn string_bytes(&mut self, what: &str) -> Result<&'a [u8]> {
        let len = self.u64(what)?;
        if len > self.remaining() as u64 {
            return Err(format_err(
                self.pos as u64,
                format!(
                    "{what}: string length {len} exceeds the {} bytes left in the file",
                    self.remaining()
                ),
            ));
        }
        self.take(len as usize, what)
    }
    fn string_utf8(&mut self, what: &str) -> Result<String> {
        let at = self.pos as u64;
        let b = self.string_bytes(what)?;
        std::str::from_utf8(b)
            .map(str::to_owned)
            .map_err(|e| format_err(at, format!("{what} is not UTF-8: {e}")))
    }
    fn value(&mut self, ty: u32, depth: usize) -> Result<MetaValue> {
        let at = self.pos as u64;
        Ok(match ty {
            0 => MetaValue::U8(self.array::<1>("a u8")?[0]),
            1 => MetaValue::I8(self.array::<1>("an i8")?[0] as i8),
            2 => MetaValue::U16(u16::from_le_bytes(self.array("a u16")?)),
            3 => MetaValue::I16(i16::from_le_bytes(self.array("an i16")?)),
            4 => MetaValue::U32(u32::from_le_bytes(self.array("a u32")?)),
            5 => MetaValue::I32(i32::from_le_bytes(self.array("an i32")?)),
            6 => MetaValue::F32(f32::from_le_bytes(self.array("an f32")?)),
            7 => match self.array::<1>("a bool")?[0] {
                0 => MetaValue::Bool(false),
                1 => MetaValue::Bool(true),
                b => {
                    return Err(format_err(
                        at,
                        format!("invalid bool byte {b}; expected 0 or 1"),
                    ));
                }
            },
            8 => MetaValue::String(
                String::from_utf8_lossy(self.string_bytes("a string value")?).into_owned(),
            ),
            9 => {
                if depth >= MAX_ARRAY_DEPTH {
                    return Err(format_err(
                        at,
                        format!("arrays nested deeper than {MAX_ARRAY_DEPTH}"),
                    ));
                }
                let elem = self.u32("an array element type")?;
                let count = self.u64("an array length")?;
                let min = match elem {
                    0 | 1 | 7 => 1,
                    2 | 3 => 2,
                    4..=6 => 4,
                    8 | 10..=12 => 8,
                    9 => 12,
                    other => {
                        return Err(format_err(
                            at,
                            format!("unknown array element type {other}"),
                        ));
                    }
                };
                self.check_count(count, min, "array elements")?;
                let mut out = Vec::with_capacity(count as usize);
                for _ in 0..count {
                    out.push(self.value(elem, depth + 1)?);
                }
                MetaValue::Array(out)
            }
            10 => MetaValue::U64(u64::from_le_bytes(self.array("a u64")?)),
            11 => MetaValue::I64(i64::from_le_bytes(self.array("an i64")?)),
            12 => MetaValue::F64(f64::from_le_bytes(self.array("an f64")?)),
            other => {
                return Err(format_err(
                    at,
                    format!("unknown metadata value type {other}; expected 0..=12"),
                ));
            }
        })
    }
}

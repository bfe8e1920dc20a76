//! A `tokenizers` tokenizer built from a GGUF file's own vocabulary: llama.cpp's `gpt2` tokenizer
//! model is a byte-level BPE whose tokens and merges are the metadata arrays
//! `tokenizer.ggml.tokens` and `tokenizer.ggml.merges`.

use humming_import::GgufFile;
use tokenizers::models::bpe::{BPE, Vocab};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::{AddedToken, Tokenizer};

/// ggml's token type of control tokens (`<|im_start|>`, ...), which become special added tokens.
const CONTROL: i64 = 3;

/// The file's tokenizer, or `None` if its metadata has no byte-level BPE (`tokenizer.ggml.model`
/// other than `gpt2`, or no tokens or merges).
pub fn from_gguf(file: &GgufFile) -> tokenizers::Result<Option<Tokenizer>> {
    let meta = |key: &str| file.get(key);
    if meta("tokenizer.ggml.model").and_then(|v| v.as_str()) != Some("gpt2") {
        return Ok(None);
    }
    let strings = |key: &str| -> Option<Vec<String>> {
        let values = meta(key)?.as_array()?;
        values
            .iter()
            .map(|v| Some(v.as_str()?.to_owned()))
            .collect()
    };
    let (Some(tokens), Some(merges)) = (
        strings("tokenizer.ggml.tokens"),
        strings("tokenizer.ggml.merges"),
    ) else {
        return Ok(None);
    };
    let types: Option<Vec<i64>> = meta("tokenizer.ggml.token_type")
        .and_then(|v| v.as_array())
        .and_then(|a| a.iter().map(|t| t.as_i64()).collect());
    let pre = meta("tokenizer.ggml.pre").and_then(|v| v.as_str());
    from_vocab(&tokens, &merges, types.as_deref(), pre).map(Some)
}

/// A byte-level BPE tokenizer: `tokens[id]` is token `id`, `merges` are `"left right"` pairs by rank,
/// `types` ggml's token types (control tokens become special tokens, matched before the BPE).
///
/// The pre-tokenizer is GPT-2's regex split; llama.cpp's `smollm` pre-tokenizer (`pre`) also splits
/// digits one by one, as SmolLM2's `tokenizer.json` does.
pub fn from_vocab(
    tokens: &[String],
    merges: &[String],
    types: Option<&[i64]>,
    pre: Option<&str>,
) -> tokenizers::Result<Tokenizer> {
    let merges = merges
        .iter()
        .map(|m| {
            let (a, b) = m
                .split_once(' ')
                .ok_or_else(|| format!("merge `{m}` is not two tokens"))?;
            Ok((a.to_owned(), b.to_owned()))
        })
        .collect::<tokenizers::Result<Vec<_>>>()?;
    let vocab: Vocab = tokens
        .iter()
        .enumerate()
        .map(|(id, t)| (t.clone(), id as u32))
        .collect();
    let bpe = BPE::builder().vocab_and_merges(vocab, merges).build()?;
    let mut tokenizer = Tokenizer::new(bpe);
    let byte_level = ByteLevel::new(false, true, true);
    if pre == Some("smollm") {
        tokenizer.with_pre_tokenizer(Some(Sequence::new(vec![
            Digits::new(true).into(),
            byte_level.into(),
        ])));
    } else {
        tokenizer.with_pre_tokenizer(Some(byte_level));
    }
    tokenizer.with_decoder(Some(ByteLevel::default()));
    let control = tokens
        .iter()
        .zip(types.unwrap_or_default())
        .filter(|&(_, &ty)| ty == CONTROL)
        .map(|(t, _)| AddedToken::from(t.clone(), true));
    tokenizer.add_special_tokens(control)?;
    Ok(tokenizer)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_level_bpe_with_digits_and_control_tokens() {
        let s = |v: &[&str]| v.iter().map(|t| t.to_string()).collect::<Vec<_>>();
        // `Ġ` is the byte-level character of a space.
        let tokens = s(&["<|x|>", "a", "b", "Ġ", "1", "2", "ab", "Ġab", "12"]);
        let merges = s(&["a b", "Ġ ab", "1 2"]);
        let types = [3, 1, 1, 1, 1, 1, 1, 1, 1];
        let tok = from_vocab(&tokens, &merges, Some(&types), Some("smollm")).unwrap();
        let enc = tok.encode("ab ab12<|x|>", false).unwrap();
        // Digits one by one (no `12`), `<|x|>` as one special token.
        assert_eq!(enc.get_ids(), [6, 7, 4, 5, 0]);
        assert_eq!(tok.decode(enc.get_ids(), false).unwrap(), "ab ab12<|x|>");
        let gpt2 = from_vocab(&tokens, &merges, None, None).unwrap();
        assert_eq!(gpt2.encode("ab12", false).unwrap().get_ids(), [6, 8]);
    }
}

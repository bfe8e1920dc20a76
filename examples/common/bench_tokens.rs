//! The tokens of the per-layer activations of the real-model examples (`smollm2`, `gemma3`): the
//! text, how its tokens are shown, and the fixed ids of a file without a usable tokenizer.

/// The text whose tokens give the activation rows of the per-layer runs (cycled to the largest M).
pub const BENCH_TEXT: &str = "The river starts high in the mountains, where snow melts in the spring \
sun and runs down through narrow valleys. Farmers along its banks have used the water for \
centuries to grow wheat, rice and fruit. In the summer the current is slow and children swim near \
the old stone bridge, while fishermen wait patiently for trout. When autumn comes, heavy rain turns \
the river brown and fast, and the town prepares for floods. Engineers built a dam above the village \
to control the water and to produce electricity for the region. Today the river is cleaner than it \
was fifty years ago, and birds have returned to the wetlands near the sea.";

/// The first 12 tokens as `id:piece` (the tokenizer's `space` shown as `_`), then ` ...` if there
/// are more.
pub fn shown(ids: &[u32], pieces: &[String], space: char) -> String {
    let shown: Vec<String> = ids
        .iter()
        .zip(pieces)
        .take(12)
        .map(|(id, s)| format!("{id}:{}", s.replace(space, "_")))
        .collect();
    let more = if ids.len() > 12 { " ..." } else { "" };
    format!("{}{more}", shown.join(" "))
}

/// Fixed token ids spread over a vocabulary of `vocab`.
pub fn fixed_ids(vocab: usize) -> Vec<u32> {
    (0..32).map(|i| ((i * 1543 + 101) % vocab) as u32).collect()
}

/// What the activation rows are: the embedding rows of the tokens (`how`), cycled to the largest M.
pub fn embedding_rows(how: &str, ms: &[usize]) -> String {
    format!(
        "embedding rows of {} (cycled to {} rows)",
        how,
        ms.iter().max().unwrap()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Twelve tokens at most, the tokenizer's space as `_`; the fixed ids wrap around the vocabulary.
    #[test]
    fn tokens_read() {
        let ids: Vec<u32> = (0..13).collect();
        let pieces: Vec<String> = ids.iter().map(|i| format!("\u{2581}t{i}")).collect();
        assert_eq!(shown(&ids[..2], &pieces[..2], '\u{2581}'), "0:_t0 1:_t1");
        let all = shown(&ids, &pieces, '\u{2581}');
        assert!(all.ends_with(" 11:_t11 ..."), "{all}");
        assert_eq!(fixed_ids(1000)[..3], [101, 644, 187]);
        assert_eq!(
            embedding_rows("3 tokens", &[16, 128, 1]),
            "embedding rows of 3 tokens (cycled to 128 rows)"
        );
    }
}

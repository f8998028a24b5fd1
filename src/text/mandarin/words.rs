//! A run of ideographs → its words, cut by jieba (the `jieba-rs` port of the segmenter misaki
//! uses, with the same dictionary inside the crate and the same hidden Markov model for words
//! the dictionary lacks). A word is what pinyin is looked up for and what a space follows.

use std::sync::OnceLock;

use jieba_rs::Jieba;

fn jieba() -> &'static Jieba {
    static JIEBA: OnceLock<Jieba> = OnceLock::new();
    JIEBA.get_or_init(Jieba::new)
}

/// Loads the segmenter's dictionary now (it loads on first use otherwise).
pub fn preload() {
    jieba();
}

/// The words of `run`, ideographs only, in order.
pub(super) fn words(run: &str) -> Vec<&str> {
    jieba().cut(run, true).into_iter().map(|t| t.word).collect()
}

#[cfg(test)]
mod tests {
    use super::words;

    #[test]
    fn runs_are_cut_into_dictionary_words() {
        assert_eq!(words("我爱北京天安门"), ["我", "爱", "北京", "天安门"]);
        assert_eq!(words("").len(), 0);
    }
}

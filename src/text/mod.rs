//! PLACEHOLDER until the text branch merges.
pub mod normalize { pub fn normalize(s: &str) -> String { s.to_string() } }
pub mod split { pub fn split_sentences(s: &str, _m: usize) -> Vec<String> { s.split_inclusive(['.', '!', '?']).map(|x| x.trim().to_string()).filter(|x| !x.is_empty()).collect() } }
pub mod phonemize {
    pub struct PhonemeIdMap;
    impl PhonemeIdMap { pub fn from_voice_json(_v: &serde_json::Value) -> Result<Self, String> { Ok(Self) } pub fn ids(&self, _p: &str) -> Vec<i64> { vec![] } }
    pub fn phonemize(t: &str, _v: &str) -> Result<String, String> { Ok(t.to_string()) }
}

//! PLACEHOLDER until the text branch merges.
use std::sync::Arc;
use super::*;
pub struct EspeakEngine;
impl EspeakEngine { pub fn new() -> Self { Self } }
impl Default for EspeakEngine { fn default() -> Self { Self } }
struct V(VoiceInfo);
impl Voice for V { fn info(&self) -> &VoiceInfo { &self.0 } fn synthesize(&self, b: &[SynthesisItem]) -> Result<Vec<Pcm>, EngineError> { Ok(b.iter().map(|i| Pcm { samples: vec![0.1; 1000 * i.text.len()], sample_rate: 22050 }).collect()) } }
impl Engine for EspeakEngine {
    fn id(&self) -> &str { "espeak" }
    fn voices(&self) -> Vec<VoiceInfo> { vec![VoiceInfo { id: "en-us".into(), engine: "espeak".into(), language: "en-US".into(), sample_rate: 22050, speakers: vec![] }] }
    fn load_voice(&self, v: &str) -> Result<Arc<dyn Voice>, EngineError> { self.find_voice(v).map(|i| Arc::new(V(i)) as Arc<dyn Voice>).ok_or_else(|| EngineError::UnknownVoice(v.into())) }
}

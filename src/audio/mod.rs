//! PLACEHOLDER until the audio branch merges.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AudioFormat { Mp3, Opus, Aac, Flac, Wav, Pcm }
impl AudioFormat {
    pub const ALL: [AudioFormat; 6] = [Self::Mp3, Self::Opus, Self::Aac, Self::Flac, Self::Wav, Self::Pcm];
    pub fn parse(s: &str) -> Option<Self> { Self::ALL.into_iter().find(|f| f.as_str() == s) }
    pub fn as_str(self) -> &'static str { match self { Self::Mp3 => "mp3", Self::Opus => "opus", Self::Aac => "aac", Self::Flac => "flac", Self::Wav => "wav", Self::Pcm => "pcm" } }
    pub fn content_type(self) -> &'static str { "audio/wav" }
    pub fn extension(self) -> &'static str { self.as_str() }
    pub fn output_sample_rate(self, native: u32) -> u32 { native }
}
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct AudioError(String);
pub trait StreamEncoder: Send {
    fn push(&mut self, samples: &[f32]) -> Result<Vec<u8>, AudioError>;
    fn finish(self: Box<Self>) -> Result<Vec<u8>, AudioError>;
    fn sample_rate(&self) -> u32;
}
pub fn stream_encoder(_f: AudioFormat, _r: u32) -> Result<Box<dyn StreamEncoder>, AudioError> { Err(AudioError("x".into())) }
pub fn encode(_f: AudioFormat, samples: &[f32], rate: u32) -> Result<Vec<u8>, AudioError> {
    let mut out = std::io::Cursor::new(Vec::new());
    let spec = hound::WavSpec { channels: 1, sample_rate: rate, bits_per_sample: 16, sample_format: hound::SampleFormat::Int };
    let mut w = hound::WavWriter::new(&mut out, spec).unwrap();
    for s in samples { w.write_sample((s.clamp(-1.0, 1.0) * 32767.0) as i16).unwrap(); }
    w.finalize().unwrap();
    Ok(out.into_inner())
}

//! What a request will be spoken as, without speaking it: the sentences, their spoken forms
//! (numbers and symbols written out) and the phonemes and model ids each becomes, so that a
//! user can see why a word sounds wrong before fixing it with the lexicon or markup.

use super::{check_sayable, Failure, Job, SpeechError, SpeechService};

/// A request's text as the voice will read it.
#[derive(Debug, Clone)]
pub struct Phonemization {
    pub sentences: Vec<PhonemizedSentence>,
}

#[derive(Debug, Clone)]
pub struct PhonemizedSentence {
    /// The sentence as written (markup gone).
    pub text: String,
    /// As it is read: numbers, dates and symbols written out.
    pub spoken: String,
    /// In the voice's own symbols.
    pub phonemes: String,
    /// The model's input ids; empty for engines that take none.
    pub ids: Vec<i64>,
    /// The engine and voice that read it (the job's, or one of its language).
    pub engine: String,
    pub voice: String,
}

impl SpeechService {
    /// The job's sentences as its voice would speak them.
    pub async fn phonemize(&self, job: &Job) -> Result<Phonemization, SpeechError> {
        let script = job.script().clone();
        let voices = self.load_voices(script.voices.clone()).await?;
        check_sayable(&voices, &script.utterances)?;
        // espeak-ng is slow and serial: off the runtime's threads.
        crate::blocking::run(move || {
            let sentences = script
                .utterances
                .into_iter()
                .map(|utterance| {
                    let (resolved, voice) = &voices[utterance.voice];
                    let phonemes = voice.phonemes(
                        &utterance.spoken.text,
                        &utterance.spoken.pronunciations,
                        resolved.reads_in.as_deref(),
                    )?;
                    Ok(PhonemizedSentence {
                        text: utterance.written,
                        spoken: utterance.spoken.text,
                        phonemes: phonemes.phonemes,
                        ids: phonemes.ids,
                        engine: resolved.key.engine().to_string(),
                        voice: resolved.key.voice().to_string(),
                    })
                })
                .collect::<Result<Vec<_>, crate::engine::EngineError>>()
                .map_err(|e| SpeechError::Engine(Failure::of(e)))?;
            Ok(Phonemization { sentences })
        })
        .await
    }
}

//! Speech for text that is still being written: text comes in pieces, as a language model
//! produces it, is cut into sentences exactly as the whole text would be (normalized, then
//! split: [`LiveText`]), and all of them become one continuous audio stream.
//!
//! Each sentence is its own request to the batcher (so a long conversation never holds a
//! place in line), but the sentences share what makes a stream one utterance: one encoder
//! (one valid file for every format), the pauses and fades of [`join`](super::join), and the
//! seed sequence of a whole request, so that text streamed in pieces sounds exactly like the
//! same text sent at once with the same seed. Live audio is never cached: every sentence is
//! new text, and its bytes only make sense inside this stream's encoder.
//!
//! An engine that would give each sentence a voice of its own (OmniVoice without a clone) is
//! kept to one: the first sentence leads, and the later ones continue from it
//! ([`OneVoice`](super::one_voice::OneVoice)).
//!
//! A stream of SSML (`input_format: "ssml"`) is a series of `<speak>` documents instead, each
//! read as a whole request reads one (breaks, prosody, voice switches) and spoken as one unit
//! once its `</speak>` has arrived: markup cannot be cut into sentences before it is whole.

use std::time::Duration;

use bytes::Bytes;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::encoder::BlockingEncoder;
use super::one_voice::OneVoice;
use super::script::{Reader, Script, Voices};
use super::synthesis::Delivery;
use super::{
    join, Failure, Job, Request, SpeechError, SpeechService, Utterances, MAX_UTTERANCE_CHARS,
};
use crate::engine::Continuation;
use crate::metrics as m;
use crate::text::incremental::{SentenceBuffer, StreamNormalizer};

/// A sentence of streamed text, normalized and cut as the whole text is cut into utterances:
/// what [`LiveSpeech::sentence`] speaks, as it is. In an SSML stream, a whole document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sentence {
    /// As written, markup gone.
    text: String,
    document: Option<LiveDocument>,
}

/// An SSML document of a stream, as read when it arrived, and the silence the documents
/// before it left owing.
#[derive(Debug, Clone)]
struct LiveDocument {
    markup: String,
    /// Read once, on arrival: that is when bad markup is refused, and what is spoken.
    script: Script,
    owed: Duration,
}

/// Two documents are the same when their markup and the silence before them are: the script
/// is what the markup reads as.
impl PartialEq for LiveDocument {
    fn eq(&self, other: &Self) -> bool {
        self.markup == other.markup && self.owed == other.owed
    }
}

impl Eq for LiveDocument {}

impl Sentence {
    pub fn text(&self) -> &str {
        &self.text
    }
}

/// An SSML stream's text: documents, each complete at its `</speak>`.
#[derive(Debug, Default)]
struct SsmlDocuments {
    buffer: String,
}

impl SsmlDocuments {
    const END: &'static str = "</speak>";

    /// Adds a piece; returns the documents it completed.
    fn push(&mut self, piece: &str) -> Vec<String> {
        // Search from just before the piece: an end tag may straddle two pieces.
        let from = self.buffer.len().saturating_sub(Self::END.len() - 1);
        let from = (0..=from)
            .rev()
            .find(|&i| self.buffer.is_char_boundary(i))
            .unwrap_or(0);
        self.buffer.push_str(piece);
        let mut documents = Vec::new();
        let mut search = from;
        while let Some(at) = self.buffer[search..].find(Self::END) {
            let end = search + at + Self::END.len();
            documents.push(self.buffer[..end].to_string());
            self.buffer.drain(..end);
            search = 0;
        }
        documents
    }

    /// The text after the last document, if it holds anything but white space: an unclosed
    /// document, which the parser refuses with its position.
    fn finish(&mut self) -> Option<String> {
        let rest = std::mem::take(&mut self.buffer);
        (!rest.trim().is_empty()).then_some(rest)
    }
}

/// Text that arrives in pieces, cut into the sentences that [`SpeechService::speak`] would
/// cut the whole text into, each as soon as it is settled: normalized as it comes in
/// ([`StreamNormalizer`]), then split ([`SentenceBuffer`]), the order of the whole-body path.
/// With a wait limit, text that waits that long for its sentence to end is spoken up to its
/// last clause. Its clock is tokio's.
#[derive(Debug, Clone)]
pub struct LiveText {
    normalizer: StreamNormalizer,
    sentences: SentenceBuffer,
}

impl LiveText {
    pub fn new(max_wait: Option<Duration>) -> Self {
        Self {
            normalizer: StreamNormalizer::new(),
            sentences: SentenceBuffer::new(MAX_UTTERANCE_CHARS, max_wait),
        }
    }

    /// Adds a piece of text; returns the sentences it completed, in order.
    pub fn push(&mut self, piece: &str) -> Vec<Sentence> {
        let normalized = self.normalizer.push(piece);
        let next = self.normalizer.peek();
        wrap(self.sentences.push_before(&normalized, &next, now()))
    }

    /// Everything received, as if the text ended here.
    pub fn flush(&mut self) -> Vec<Sentence> {
        let normalized = self.normalizer.finish();
        let mut done = self.sentences.push(&normalized, now());
        done.extend(self.sentences.finish());
        wrap(done)
    }

    /// When text will have waited too long for its sentence to end, if any waits.
    pub fn deadline(&self) -> Option<Instant> {
        self.sentences.deadline().map(Instant::from_std)
    }

    /// Once the [`deadline`](Self::deadline) has passed, what can be spoken without waiting
    /// for more (see [`SentenceBuffer::flush_overdue`]).
    pub fn flush_overdue(&mut self) -> Vec<Sentence> {
        wrap(self.sentences.flush_overdue(now()))
    }

    /// Characters received and not handed out in a sentence yet.
    pub fn pending_chars(&self) -> usize {
        self.normalizer.pending_chars() + self.sentences.pending().chars().count()
    }
}

fn now() -> std::time::Instant {
    Instant::now().into_std()
}

fn wrap(sentences: Vec<String>) -> Vec<Sentence> {
    sentences
        .into_iter()
        .map(|text| Sentence {
            text,
            document: None,
        })
        .collect()
}

/// One stream of speech fed text piece by piece. Each sentence the text makes
/// ([`push_text`](Self::push_text)) and that is handed in ([`sentence`](Self::sentence)) is
/// synthesized at once, concurrently with the others, and its audio is encoded strictly in
/// the order the sentences were handed in, a piece at a time as it is computed.
pub struct LiveSpeech {
    service: SpeechService,
    text: LiveText,
    /// Set for a stream of SSML documents, which then takes the text instead of `text`.
    ssml: Option<SsmlDocuments>,
    /// Silence the documents cut so far left owing: their trailing breaks, and documents of
    /// breaks alone. It goes before the next document, or at the end of the stream.
    owed: Duration,
    job: Job,
    base_seed: u64,
    /// Utterance index of the next sentence's first utterance, across the whole stream.
    next_utterance: usize,
    /// Sentences handed in, and encoded completely.
    handed_in: usize,
    encoded: usize,
    encoder: BlockingEncoder,
    joiner: join::Joiner,
    /// Where the sentence being encoded starts in the stream (after its pause), in samples.
    sentence_start: Option<usize>,
    /// The voice's native rate, at which sentences arrive.
    rate: u32,
    /// The stream's voice, where it would drift between sentences.
    one_voice: OneVoice,
}

/// A live stream used out of turn: a fault of the caller's code, never of a request.
#[derive(Debug, thiserror::Error)]
enum Misuse {
    #[error("sentence {index} came out of order (expected {expected})")]
    OutOfOrder { index: usize, expected: usize },
}

/// A sentence on its way: its audio arrives in parts, from a task that stops when this is
/// dropped.
pub struct SentenceAudio {
    index: usize,
    parts: mpsc::UnboundedReceiver<Result<Delivery, SpeechError>>,
    task: tokio::task::JoinHandle<()>,
}

/// A part of a sentence's audio, for [`LiveSpeech::encode`].
pub struct SentencePart {
    index: usize,
    delivery: Result<Delivery, SpeechError>,
}

/// A sentence as it went into the stream.
#[derive(Debug, Clone)]
pub struct SpokenSentence {
    /// Where its speech starts in the stream (after the pause before it), in seconds.
    pub start_s: f64,
    /// How long its speech lasts, in seconds (0 for text with nothing to speak).
    pub duration_s: f64,
}

impl SpeechService {
    /// Validates everything of `request` but its input (which is ignored) and opens a stream;
    /// on a blocking thread, as [`prepare`](Self::prepare).
    pub async fn live(&self, request: Request) -> Result<LiveSpeech, SpeechError> {
        let this = self.clone();
        crate::blocking::run(move || this.live_here(request)).await
    }

    fn live_here(&self, request: Request) -> Result<LiveSpeech, SpeechError> {
        // A stream has no input yet to look at: plain text unless it says SSML.
        let ssml = super::request::is_ssml_format(request.input_format.as_deref())?
            .unwrap_or(false)
            .then(SsmlDocuments::default);
        let job = super::request::validate_settings(
            Request {
                use_cache: false,
                ..request
            },
            &self.inner.registry,
            &self.inner.limits,
            self.inner.lexicon.current(),
        )?;
        let rate = job.voice().sample_rate;
        let encoder = BlockingEncoder::of(&job)?;
        let one_voice = OneVoice::new(self.inner.registry.drifts(job.voice()));
        Ok(LiveSpeech {
            service: self.clone(),
            text: LiveText::new(None),
            ssml,
            owed: Duration::ZERO,
            base_seed: job.params().seed.unwrap_or_else(rand::random),
            job,
            next_utterance: 0,
            handed_in: 0,
            encoded: 0,
            encoder,
            joiner: join::Joiner::new(rate),
            sentence_start: None,
            rate,
            one_voice,
        })
    }
}

impl LiveSpeech {
    /// Rate of the encoded audio.
    pub fn sample_rate(&self) -> u32 {
        self.job.format().output_sample_rate(self.rate)
    }

    /// The validated settings (voice, format, parameters) of the stream.
    pub fn job(&self) -> &Job {
        &self.job
    }

    /// The same stream, with text that waits `max_wait` for its sentence to end spoken up to
    /// its last clause (see [`LiveText`]); without, it waits for the sentence.
    pub fn with_max_wait(mut self, max_wait: Option<Duration>) -> Self {
        self.text = LiveText::new(max_wait);
        self
    }

    /// Adds a piece of the text; returns the sentences it completed, to hand in. An SSML
    /// document that cannot be read is refused here, when its `</speak>` arrives.
    pub fn push_text(&mut self, piece: &str) -> Result<Vec<Sentence>, SpeechError> {
        match self.ssml.as_mut() {
            None => Ok(self.text.push(piece)),
            Some(documents) => {
                let complete = documents.push(piece);
                self.documents(complete)
            }
        }
    }

    /// The sentences of everything received, as if the text ended here.
    pub fn flush(&mut self) -> Result<Vec<Sentence>, SpeechError> {
        match self.ssml.as_mut() {
            None => Ok(self.text.flush()),
            Some(documents) => {
                let rest = documents.finish();
                self.documents(rest.into_iter().collect())
            }
        }
    }

    /// When text will have waited too long for its sentence to end, if any waits: then
    /// [`flush_overdue`](Self::flush_overdue). Never for SSML: a document waits for its end.
    pub fn deadline(&self) -> Option<Instant> {
        match self.ssml {
            None => self.text.deadline(),
            Some(_) => None,
        }
    }

    /// Past the [`deadline`](Self::deadline), the sentences that can be spoken without
    /// waiting for more text.
    pub fn flush_overdue(&mut self) -> Vec<Sentence> {
        self.text.flush_overdue()
    }

    /// Characters of text received and not yet in a sentence.
    pub fn pending_chars(&self) -> usize {
        match &self.ssml {
            None => self.text.pending_chars(),
            Some(documents) => documents.buffer.chars().count(),
        }
    }

    /// Complete SSML documents as sentences, each read now so that bad markup is refused when
    /// it arrives; a document of breaks alone only adds to the silence owed.
    fn documents(&mut self, documents: Vec<String>) -> Result<Vec<Sentence>, SpeechError> {
        let mut sentences = Vec::new();
        for markup in documents {
            let script = self.read(&markup)?;
            if script.utterances.is_empty() {
                self.owed = self.owed.max(script.trailing);
                continue;
            }
            let text = script
                .utterances
                .iter()
                .map(|u| u.written.trim())
                .collect::<Vec<_>>()
                .join(" ");
            let owed = std::mem::replace(&mut self.owed, script.trailing);
            sentences.push(Sentence {
                text,
                document: Some(LiveDocument {
                    markup,
                    script,
                    owed,
                }),
            });
        }
        Ok(sentences)
    }

    /// An SSML document as a whole request of this stream's settings reads it.
    fn read(&self, markup: &str) -> Result<Script, SpeechError> {
        self.reader().script(markup, true)
    }

    /// A sentence of plain text as the stream's voice reads it, or as the voice that speaks
    /// its writing does (a sentence in ideographs, say); refused when the voice was named
    /// outright and cannot read it.
    fn read_sentence(&self, text: &str) -> Result<Script, SpeechError> {
        self.reader().sentence(text)
    }

    /// What reads this stream's text: its voice (and whether it was named outright), the
    /// server's language routing, its reading settings and lexicon.
    fn reader(&self) -> Reader<'_> {
        let inner = &self.service.inner;
        Reader {
            voices: Voices {
                registry: &inner.registry,
                voice: self.job.voice(),
                languages: &inner.limits.text.languages,
                outright: self.job.voice_named_outright(),
            },
            reading: self.job.reading(),
            lexicon: self.job.lexicon(),
        }
    }

    /// Hands in the next sentence and starts synthesizing it.
    pub fn sentence(&mut self, sentence: Sentence) -> SentenceAudio {
        let script = match sentence.document {
            None => match self.read_sentence(&sentence.text) {
                Ok(script) => script,
                Err(refusal) => return self.refused(refusal),
            },
            Some(document) => {
                self.place_pauses(&document.script, document.owed);
                document.script
            }
        };
        let first_index = self.next_utterance;
        self.next_utterance += script.utterances.len();
        let index = self.handed_in_next();
        let (service, job, base_seed) = (self.service.clone(), self.job.clone(), self.base_seed);
        let turn = self.one_voice.next();
        let (sender, parts) = mpsc::unbounded_channel();
        let task = tokio::spawn(async move {
            let continuation = turn.continuation().await.unwrap_or(Continuation::Alone);
            metrics::counter!(m::SYNTHESES_TOTAL).increment(1);
            let utterances = Utterances {
                script,
                base_seed,
                first_index,
                word_timings: false,
                continuation,
            };
            let mut synthesis = match service.start_utterances(&job, utterances, true).await {
                Ok(synthesis) => synthesis,
                Err(e) => {
                    let _ = sender.send(Err(e));
                    return;
                }
            };
            while let Some(delivery) = synthesis.next_piece().await {
                if let Ok(Delivery::Piece(pcm)) = &delivery {
                    turn.leave(pcm.continuity.as_ref());
                }
                let failed = delivery.is_err();
                if sender.send(delivery).is_err() || failed {
                    return;
                }
            }
        });
        SentenceAudio { index, parts, task }
    }

    /// A sentence that cannot be spoken, handed in all the same: its one part is the refusal,
    /// which the stream reports as it reports a failed synthesis.
    fn refused(&mut self, refusal: SpeechError) -> SentenceAudio {
        let index = self.handed_in_next();
        let (sender, parts) = mpsc::unbounded_channel();
        let _ = sender.send(Err(refusal));
        let task = tokio::spawn(async {});
        SentenceAudio { index, parts, task }
    }

    /// The index of the sentence being handed in.
    fn handed_in_next(&mut self) -> usize {
        self.handed_in += 1;
        self.handed_in - 1
    }

    /// A document's pauses in the stream: its own between its sentences, and before its first
    /// the longest of the usual sentence pause (none at the start of the stream), its opening
    /// break and the silence owed before it (as breaks in a row join in one document).
    fn place_pauses(&mut self, script: &Script, owed: Duration) {
        let first = self.next_utterance;
        for (i, utterance) in script.utterances.iter().enumerate() {
            let pause = match i {
                0 => {
                    let usual = if first == 0 {
                        Duration::ZERO
                    } else {
                        join::SENTENCE_PAUSE
                    };
                    usual.max(utterance.pause_before).max(owed)
                }
                _ => utterance.pause_before,
            };
            self.joiner.set_pause_before(first + i, pause);
        }
    }

    /// Appends a part of the sentence being encoded to the stream: the bytes to send now.
    /// Sentences must come in the order they were handed in.
    pub async fn encode(&mut self, part: SentencePart) -> Result<Bytes, SpeechError> {
        if part.index != self.encoded {
            return Err(SpeechError::Encoding(Failure::of(Misuse::OutOfOrder {
                index: part.index,
                expected: self.encoded,
            })));
        }
        let mut samples = Vec::new();
        match part.delivery? {
            Delivery::Piece(pcm) => {
                if let Some(start) = self.joiner.push(&pcm.samples, &mut samples) {
                    self.sentence_start.get_or_insert(start);
                }
            }
            Delivery::SentenceEnd => self.joiner.end_sentence(&mut samples),
        }
        Ok(Bytes::from(self.encoder.push(samples).await?))
    }

    /// The sentence being encoded has no more parts: where it went in the stream.
    pub fn end_sentence(&mut self, audio: SentenceAudio) -> Result<SpokenSentence, SpeechError> {
        if audio.index != self.encoded {
            return Err(SpeechError::Encoding(Failure::of(Misuse::OutOfOrder {
                index: audio.index,
                expected: self.encoded,
            })));
        }
        self.encoded += 1;
        let end = self.joiner.position();
        let start = self.sentence_start.take().unwrap_or(end);
        let seconds = |samples: usize| samples as f64 / f64::from(self.rate);
        Ok(SpokenSentence {
            start_s: seconds(start),
            duration_s: seconds(end - start),
        })
    }

    /// Ends the stream: the encoder's last bytes (none when it has ended already).
    pub async fn finish(&mut self) -> Result<Bytes, SpeechError> {
        if !self.encoder.is_open() {
            return Ok(Bytes::new());
        }
        // The silence the last documents left owing closes the stream.
        let mut samples = Vec::new();
        self.joiner.set_pause_after(self.owed);
        self.joiner.finish(&mut samples);
        m::add_audio_seconds(self.duration_s());
        Ok(Bytes::from(self.encoder.finish(samples).await?))
    }

    /// Seconds of audio in the stream so far, pauses included.
    pub fn duration_s(&self) -> f64 {
        self.joiner.position() as f64 / f64::from(self.rate)
    }
}

impl SentenceAudio {
    /// The next part of the sentence's audio as it is computed; `None` once it is complete.
    pub async fn next_part(&mut self) -> Option<SentencePart> {
        let delivery = self.parts.recv().await?;
        Some(SentencePart {
            index: self.index,
            delivery,
        })
    }
}

impl Drop for SentenceAudio {
    fn drop(&mut self) {
        // Nobody will play it: stop synthesizing (queued utterances are then dropped too).
        self.task.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ssml_documents_end_at_their_end_tag_however_it_is_cut() {
        let stream = "<speak>Één.</speak> <speak>Two.</speak><speak>Drei";
        for n in 1..=stream.len() {
            let mut documents = SsmlDocuments::default();
            let mut out = Vec::new();
            let chars: Vec<char> = stream.chars().collect();
            for piece in chars.chunks(n) {
                out.extend(documents.push(&piece.iter().collect::<String>()));
            }
            assert_eq!(
                out,
                ["<speak>Één.</speak>", " <speak>Two.</speak>"],
                "pieces of {n}"
            );
            assert_eq!(documents.finish().as_deref(), Some("<speak>Drei"));
        }
        let mut documents = SsmlDocuments::default();
        assert!(documents.push("<speak>A.</speak>\n  ").len() == 1);
        assert_eq!(
            documents.finish(),
            None,
            "white space after the last is no document"
        );
    }

    const MARKUP: &str = "# Streaming\nMr. **Smith** paid 3.50 dollars, i.e. *less*. See \
        [the docs. Really](https://x.org/a_b) now!\n\n- apples\n- pears. And more\nA heading\n\n\
        Some text, e.g. this. Dr. Jones met me at 3.14 p.m. Done. - not a list. “Quoted,” he \
        said… ```rust\nlet x = 1;\n```\nThe end";

    fn sentences_of(pieces: &[String]) -> Vec<String> {
        let mut text = LiveText::new(None);
        let mut out = Vec::new();
        for piece in pieces {
            out.extend(text.push(piece));
        }
        out.extend(text.flush());
        assert_eq!(text.pending_chars(), 0);
        out.into_iter().map(|s| s.text).collect()
    }

    /// Streamed in any pieces, the text becomes the utterances of the whole text, in order.
    #[test]
    fn streamed_text_becomes_the_utterances_of_the_whole_text() {
        let whole = super::super::sentences(MARKUP);
        assert!(whole.len() > 8, "{whole:?}");
        let chars: Vec<char> = MARKUP.chars().collect();
        for cut in 0..=chars.len() {
            let pieces = [chars[..cut].iter().collect(), chars[cut..].iter().collect()];
            assert_eq!(sentences_of(&pieces), whole, "cut at char {cut}");
        }
        for n in [1, 2, 3, 5, 8, 13] {
            let pieces: Vec<String> = chars.chunks(n).map(|c| c.iter().collect()).collect();
            assert_eq!(sentences_of(&pieces), whole, "pieces of {n}");
        }
    }

    /// A sentence is out as soon as the next one has begun, before the next word ends.
    #[test]
    fn a_sentence_is_out_once_the_next_one_begins() {
        let mut text = LiveText::new(None);
        assert!(text.push("First **sentence**. ").is_empty());
        let out = text.push("Sec");
        assert_eq!(out, wrap(vec!["First sentence.".into()]));
        assert!(text.push("ond, unfinished").is_empty());
        assert_eq!(text.flush(), wrap(vec!["Second, unfinished".into()]));
        // A link's text may still be cut off: nothing is settled inside it.
        assert!(text.push("Read [the docs. Now").is_empty());
        assert_eq!(
            text.push("](x) and go. "),
            wrap(vec!["Read the docs.".into()])
        );
    }

    #[test]
    fn generated_text_becomes_the_utterances_of_the_whole_text() {
        let tokens = [
            "**",
            "*",
            "_",
            "`",
            "```",
            "[",
            "](",
            ")",
            "]",
            "(",
            "<https://a.b>",
            "#",
            "\n",
            "\n\n",
            "- ",
            "> ",
            "word",
            "Word",
            "Dr.",
            "e.g.",
            "3.14",
            ".",
            "!",
            "?",
            "...",
            ",",
            ";",
            "\"",
            "“",
            "’",
            "–",
            "--",
            "…",
            " ",
            "  ",
            "1990",
            "Ünï",
            "👍",
            "U.S.",
            "X.",
        ];
        let mut state: u64 = 0x2545_F491_4F6C_DD1D;
        let mut next = |n: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % n as u64) as usize
        };
        for round in 0..1500 {
            let text: String = (0..(round % 60))
                .map(|_| tokens[next(tokens.len())])
                .collect();
            let chars: Vec<char> = text.chars().collect();
            let mut cuts: Vec<usize> = (0..next(10)).map(|_| next(chars.len() + 1)).collect();
            cuts.sort_unstable();
            cuts.push(chars.len());
            let mut at = 0;
            let pieces: Vec<String> = cuts
                .iter()
                .map(|&cut| {
                    let piece = chars[at..cut].iter().collect();
                    at = cut;
                    piece
                })
                .collect();
            let whole = super::super::sentences(&text);
            assert_eq!(sentences_of(&pieces), whole, "{text:?} cut at {cuts:?}");
        }
    }
}

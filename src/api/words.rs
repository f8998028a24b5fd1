//! A word of the input and when it is heard, as every answer with word timings sends it: the
//! `speech.audio.timestamps` events of `POST /v1/audio/speech` and the timestamps routes.

use serde::Serialize;
use utoipa::ToSchema;

use crate::speech::WordStamp;

/// A word of the input and when it is heard.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct TimedWord {
    /// The word as written in the input, surrounding punctuation aside (`"$100"`, `"U.S"`).
    word: String,
    start: f64,
    end: f64,
    /// Where the word is in `input`, in Unicode characters (code points): `[char_start,
    /// char_end)`.
    char_start: usize,
    char_end: usize,
}

impl From<WordStamp> for TimedWord {
    fn from(w: WordStamp) -> Self {
        Self {
            word: w.word,
            start: w.start_s,
            end: w.end_s,
            char_start: w.char_start,
            char_end: w.char_end,
        }
    }
}

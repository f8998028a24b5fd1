//! A stream's first utterance spoken as two, its first phrase and then the rest, so that its
//! first audio leaves after a few words instead of after the whole sentence.
//!
//! Kokoro cannot hand out the start of an utterance before its end exists (the instance norms
//! of its decoder and generator see all of it), but an utterance need not be a whole sentence.
//! The phrase ends where a speaker could breathe ([`crate::text::phrase`]), and the join is
//! made so that it is not heard: each side loses the silence the model puts around a whole
//! utterance, the two are kept a short pause apart (longer after a clause mark, never more
//! than [`PAUSE_AFTER_MARK_S`]), and the edges fade over a few milliseconds so that the join
//! makes no step. Each side carries its own word timings, moved to where its audio lies.

use std::ops::Range;

use crate::engine::{EngineError, Pcm, SynthesisItem, WordTiming};

/// The pause at a cut after a clause mark: a short breath, shorter than the model's own.
const PAUSE_AFTER_MARK_S: f32 = 0.08;
/// The pause at a cut between two words: just enough to separate the two utterances' edges.
const PAUSE_BETWEEN_WORDS_S: f32 = 0.03;
/// Fade at each edge of the join.
const FADE_S: f32 = 0.005;
/// Audio kept beyond the last (before the first) loud stretch: soft sounds at a word's edge
/// (a final /s/, an initial /h/) are quieter than the threshold.
const MARGIN_S: f32 = 0.015;
/// Windows over which loudness is judged.
const WINDOW_S: f32 = 0.005;
/// Loud: within 40 dB of the utterance's peak.
const LOUD_OF_PEAK: f32 = 0.01;

/// Speaks `item` as its first phrase (`text[..cut]`) and its rest (`text[cut..]`), handing each
/// to `piece` as soon as it exists; `speak` computes one utterance. A cut that leaves either
/// side without words speaks the item whole.
pub fn in_two(
    item: &SynthesisItem,
    cut: usize,
    speak: impl Fn(&SynthesisItem) -> Result<Pcm, EngineError>,
    piece: &mut dyn FnMut(Pcm) -> bool,
) -> Result<(), EngineError> {
    let text = &item.text;
    let first_end = text.get(..cut).map_or(0, |first| first.trim_end().len());
    if first_end == 0 || text[cut..].trim().is_empty() {
        piece(speak(item)?);
        return Ok(());
    }
    let mut first = speak(&part(item, 0..first_end))?;
    let rate = first.sample_rate;
    let ends_clause =
        text[..first_end].ends_with(|c: char| c.is_ascii_punctuation() || "—–…".contains(c));
    let pause = if ends_clause {
        PAUSE_AFTER_MARK_S
    } else {
        PAUSE_BETWEEN_WORDS_S
    };
    let end = speech_span(&first.samples, rate).end;
    first.samples.truncate(end);
    fade_out(&mut first.samples, seconds(FADE_S, rate));
    first
        .samples
        .resize(first.samples.len() + seconds(pause, rate), 0.0);
    let offset = first.samples.len();
    if let Some(words) = first.words.as_mut() {
        for word in words.iter_mut() {
            word.end = word.end.min(end);
            word.start = word.start.min(word.end);
        }
    }
    if !piece(first) {
        return Ok(());
    }
    let mut rest = speak(&part(item, cut..text.len()))?;
    let start = speech_span(&rest.samples, rate).start;
    rest.samples.drain(..start);
    fade_in(&mut rest.samples, seconds(FADE_S, rate));
    let len = rest.samples.len();
    if let Some(words) = rest.words.as_mut() {
        for word in words.iter_mut() {
            let moved = |at: usize| offset + at.saturating_sub(start).min(len);
            *word = WordTiming {
                text: word.text.start + cut..word.text.end + cut,
                start: moved(word.start),
                end: moved(word.end),
            };
        }
    }
    piece(rest);
    Ok(())
}

/// The item for `range` of `item`'s text, with the pronunciations inside it.
fn part(item: &SynthesisItem, range: Range<usize>) -> SynthesisItem {
    let pronunciations = item
        .pronunciations
        .iter()
        .filter(|p| range.start <= p.text.start && p.text.end <= range.end)
        .map(|p| crate::text::Pronunciation {
            text: p.text.start - range.start..p.text.end - range.start,
            ipa: p.ipa.clone(),
        })
        .collect();
    SynthesisItem {
        text: item.text[range].to_string(),
        pronunciations,
        phrase_end: None,
        in_pieces: false,
        ..item.clone()
    }
}

fn seconds(s: f32, rate: u32) -> usize {
    (s * rate as f32).round() as usize
}

/// The samples from a little before the first loud window to a little after the last: the
/// utterance without the silence the model puts around it. All of it when nothing is loud.
fn speech_span(samples: &[f32], rate: u32) -> Range<usize> {
    let peak = samples.iter().fold(0.0f32, |m, s| m.max(s.abs()));
    let window = seconds(WINDOW_S, rate).max(1);
    let loud = |chunk: &[f32]| chunk.iter().any(|s| s.abs() >= LOUD_OF_PEAK * peak);
    let chunks: Vec<&[f32]> = samples.chunks(window).collect();
    let (Some(first), Some(last)) = (
        chunks.iter().position(|c| loud(c)),
        chunks.iter().rposition(|c| loud(c)),
    ) else {
        return 0..samples.len();
    };
    if peak == 0.0 {
        return 0..samples.len();
    }
    let margin = seconds(MARGIN_S, rate);
    let start = (first * window).saturating_sub(margin);
    let end = ((last + 1) * window + margin).min(samples.len());
    start..end
}

/// Gains 0, 1/n, … on the first `n` samples.
fn fade_in(samples: &mut [f32], n: usize) {
    let n = n.min(samples.len());
    for (i, sample) in samples.iter_mut().take(n).enumerate() {
        *sample *= i as f32 / n as f32;
    }
}

/// Gains …, 1/n, 0 on the last `n` samples.
fn fade_out(samples: &mut [f32], n: usize) {
    let n = n.min(samples.len());
    for (i, sample) in samples.iter_mut().rev().take(n).enumerate() {
        *sample *= i as f32 / n as f32;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    const RATE: u32 = 1000;

    /// A fake utterance: `lead` samples of silence, then a tone with one word per 100
    /// samples, then `trail` of silence; the words timed where their tone is.
    fn utterance(text: &str, lead: usize, trail: usize) -> Pcm {
        let words: Vec<Range<usize>> = text
            .split_whitespace()
            .map(|w| {
                let at = w.as_ptr() as usize - text.as_ptr() as usize;
                at..at + w.len()
            })
            .collect();
        let voiced = 100 * words.len();
        let mut samples = vec![0.0; lead];
        samples.extend((0..voiced).map(|i| 0.5 * (i as f32 * 0.7).sin() + 0.3));
        samples.extend(vec![0.0; trail]);
        let timings = words
            .into_iter()
            .enumerate()
            .map(|(i, text)| WordTiming {
                text,
                start: lead + 100 * i,
                end: lead + 100 * (i + 1),
            })
            .collect();
        Pcm {
            samples,
            sample_rate: RATE,
            words: Some(timings),
            continuity: None,
        }
    }

    fn spoken(item: &SynthesisItem, cut: usize) -> (Vec<Pcm>, Vec<String>) {
        let said = RefCell::new(Vec::new());
        let speak = |part: &SynthesisItem| {
            said.borrow_mut().push(part.text.clone());
            Ok(utterance(&part.text, 200, 300))
        };
        let mut pieces = Vec::new();
        in_two(item, cut, speak, &mut |pcm| {
            pieces.push(pcm);
            true
        })
        .unwrap();
        (pieces, said.into_inner())
    }

    #[test]
    fn the_phrases_lose_their_silence_at_the_join_and_keep_a_short_pause() {
        let text = "one two, three four five";
        let item = SynthesisItem::new(text);
        let cut = text.find("three").unwrap();
        let (pieces, said) = spoken(&item, cut);
        assert_eq!(said, ["one two,", "three four five"]);
        assert_eq!(pieces.len(), 2);
        let (first, rest) = (&pieces[0].samples, &pieces[1].samples);
        let margin = seconds(MARGIN_S, RATE);
        // The lead stays before the first phrase; its trail is gone but for the margin,
        // and an 80 ms pause follows a comma.
        assert_eq!(first.len(), 200 + 200 + margin + 80);
        // The rest keeps its trail: that is the sentence's end.
        assert_eq!(rest.len(), margin + 300 + 300);
        assert!(first[first.len() - 80 - 1..].iter().all(|&s| s == 0.0));
        assert_eq!(rest[0], 0.0);
        // No step at the join larger than inside the phrases.
        let joined: Vec<f32> = first.iter().chain(rest).copied().collect();
        let step = |s: &[f32]| {
            s.windows(2)
                .map(|w| (w[1] - w[0]).abs())
                .fold(0.0, f32::max)
        };
        let inside = step(&utterance(text, 0, 0).samples);
        let edges = &joined[first.len() - 90..first.len() + 30];
        assert!(step(edges) <= inside, "{} > {inside}", step(edges));
    }

    #[test]
    fn the_words_keep_their_text_and_move_with_their_audio() {
        let text = "alpha beta gamma delta";
        let cut = text.find("gamma").unwrap();
        let (pieces, _) = spoken(&SynthesisItem::new(text), cut);
        let first = pieces[0].words.clone().unwrap();
        let rest = pieces[1].words.clone().unwrap();
        let named: Vec<&str> = first
            .iter()
            .chain(&rest)
            .map(|w| &text[w.text.clone()])
            .collect();
        assert_eq!(named, ["alpha", "beta", "gamma", "delta"]);
        assert_eq!((first[0].start, first[1].end), (200, 400));
        // No comma: a 30 ms pause; the rest's audio (and its first word) starts one margin
        // before its tone.
        let offset = pieces[0].samples.len();
        assert_eq!(offset, 400 + seconds(MARGIN_S, RATE) + 30);
        let margin = seconds(MARGIN_S, RATE);
        assert_eq!(rest[0].start, offset + margin);
        assert_eq!(rest[1].end, offset + margin + 200);
        assert!(rest[1].end <= offset + pieces[1].samples.len());
    }

    #[test]
    fn pronunciations_go_with_their_phrase() {
        let text = "say nginx now, then kokoro later";
        let range = |w: &str| {
            let at = text.find(w).unwrap();
            at..at + w.len()
        };
        let mut item = SynthesisItem::new(text);
        item.pronunciations = vec![
            crate::text::Pronunciation {
                text: range("nginx"),
                ipa: "ˈɛndʒɪnˈɛks".into(),
            },
            crate::text::Pronunciation {
                text: range("kokoro"),
                ipa: "kˈOkəɹO".into(),
            },
        ];
        let cut = text.find("then").unwrap();
        let (first, rest) = (part(&item, 0..cut - 1), part(&item, cut..text.len()));
        assert_eq!(&first.text[first.pronunciations[0].text.clone()], "nginx");
        assert_eq!(first.pronunciations.len(), 1);
        assert_eq!(&rest.text[rest.pronunciations[0].text.clone()], "kokoro");
        assert!(rest.phrase_end.is_none() && !rest.in_pieces);
    }

    #[test]
    fn a_cut_with_nothing_on_one_side_speaks_the_item_whole() {
        let item = SynthesisItem::new("just this ");
        for cut in [0, item.text.len() - 1, item.text.len(), 99] {
            let (pieces, said) = spoken(&item, cut);
            assert_eq!(said, ["just this "], "cut at {cut}");
            assert_eq!(pieces.len(), 1);
        }
    }

    #[test]
    fn a_listener_gone_after_the_first_phrase_stops_the_rest() {
        let text = "one two three, four five six";
        let said = RefCell::new(0);
        let speak = |part: &SynthesisItem| {
            *said.borrow_mut() += 1;
            Ok(utterance(&part.text, 10, 10))
        };
        in_two(
            &SynthesisItem::new(text),
            text.find("four").unwrap(),
            speak,
            &mut |_| false,
        )
        .unwrap();
        assert_eq!(said.into_inner(), 1);
    }
}

//! Subtitles of speech: SubRip (`.srt`) and WebVTT (`.vtt`) cues from the words' timestamps.
//!
//! Video editors, players and `<track>` elements read captions as cue files, not as word
//! lists. Cues here follow common captioning practice: a cue never spans two sentences (where
//! the engine paused), lasts at most [`MAX_CUE_S`] and fits in [`MAX_LINES`] lines of
//! [`MAX_LINE_CHARS`]; a sentence too long for one cue is cut into as few as possible, as
//! even as possible, preferably after a clause's punctuation. The cue text is the input as the client
//! wrote it (punctuation, quotes and spelling kept), found through the words' character
//! offsets, so captions read as the script does rather than as the engine's normalized text.

use std::fmt::Write as _;
use std::ops::Range;

use super::{Job, SpeechError, SpeechService, WordStamp};

/// Longest a cue stays up, its linger included, in seconds (unless one word lasts longer).
const MAX_CUE_S: f64 = 5.0;
/// Characters per caption line, and lines per cue: the common broadcast limits.
const MAX_LINE_CHARS: usize = 42;
const MAX_LINES: usize = 2;
/// A cue stays up this long after its last word (unless the next cue or the audio comes
/// first), so that a short cue can still be read.
const LINGER_S: f64 = 0.5;
/// Punctuation after which a sentence is best cut into cues.
const CLAUSE_ENDS: [char; 7] = [',', ';', ':', '—', '–', '…', ')'];
/// What cutting between two words of a phrase costs, against the squared characters a cue
/// is short of full: as much as 20 characters of unevenness.
const PHRASE_CUT_COST: usize = 20 * 20;

/// A subtitle file format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SubtitleFormat {
    /// SubRip: numbered cues, `HH:MM:SS,mmm` times, text as is.
    Srt,
    /// WebVTT: a `WEBVTT` header, `HH:MM:SS.mmm` times, `&`, `<`, `>` escaped.
    #[default]
    Vtt,
}

impl SubtitleFormat {
    pub const ALL: [SubtitleFormat; 2] = [SubtitleFormat::Srt, SubtitleFormat::Vtt];

    /// The name clients use, which is also the file extension.
    pub fn as_str(self) -> &'static str {
        match self {
            SubtitleFormat::Srt => "srt",
            SubtitleFormat::Vtt => "vtt",
        }
    }

    /// The media type, without parameters (the text is always UTF-8).
    pub fn media_type(self) -> &'static str {
        match self {
            SubtitleFormat::Srt => "application/x-subrip",
            SubtitleFormat::Vtt => "text/vtt",
        }
    }
}

/// A subtitle file for a job's speech.
#[derive(Debug, Clone)]
pub struct Subtitles {
    pub format: SubtitleFormat,
    /// The whole file.
    pub text: String,
    /// How many cues it has.
    pub cues: usize,
    /// Length in seconds of the audio the cues belong to.
    pub duration_s: f64,
}

impl SpeechService {
    /// Synthesizes the job, as [`speak_with_words`](Self::speak_with_words) would with the
    /// same seed, and answers the cues of its words in `format`; the audio itself is not
    /// encoded. With a fixed seed, [`speak`](Self::speak) gives the audio they belong to.
    pub async fn subtitles(
        &self,
        job: Job,
        format: SubtitleFormat,
    ) -> Result<Subtitles, SpeechError> {
        let timed = self.timed_words(&job).await?;
        let cues = cues(job.input(), &timed.words, timed.duration_s);
        Ok(Subtitles {
            format,
            text: render(format, &cues),
            cues: cues.len(),
            duration_s: timed.duration_s,
        })
    }
}

/// One caption: its lines and when it is shown.
#[derive(Debug, Clone, PartialEq)]
struct Cue {
    start_s: f64,
    end_s: f64,
    lines: Vec<String>,
}

/// The words of `input` grouped into cues, in order and never overlapping, none past
/// `duration_s` (the audio's end).
fn cues(input: &str, words: &[WordStamp], duration_s: f64) -> Vec<Cue> {
    let chars: Vec<char> = input.chars().collect();
    let mut groups = Vec::new();
    let mut first = 0;
    for i in 1..=words.len() {
        if i == words.len() || words[i].sentence != words[first].sentence {
            groups.extend(split_sentence(&chars, words, first..i));
            first = i;
        }
    }
    let mut taken = 0;
    let mut cues: Vec<Cue> = Vec::with_capacity(groups.len());
    for group in groups {
        let start_s = words[group.start].start_s;
        let spoken_end = words[group.end - 1].end_s;
        let (text, end) = text_of(&chars, words, group.clone(), taken);
        taken = end;
        let next = words.get(group.end).map_or(duration_s, |w| w.start_s);
        let end_s = (spoken_end + LINGER_S)
            .min(next)
            .min(start_s + MAX_CUE_S)
            .max(spoken_end);
        cues.push(Cue {
            start_s,
            end_s,
            lines: wrap(&text),
        });
    }
    cues
}

/// A sentence's words cut into as few cues as the limits allow, and of those cuts the one
/// with the most even cues, a cut after a clause counting as more even than one between two
/// words of a phrase. (Filling cues one after the other instead leaves a last cue of one
/// word as often as not.) A word too long for any cue gets one of its own.
fn split_sentence(
    chars: &[char],
    words: &[WordStamp],
    sentence: Range<usize>,
) -> Vec<Range<usize>> {
    let room = MAX_LINES * MAX_LINE_CHARS;
    // best[i]: the fewest cues, then the least unevenness, for the first i words; and where
    // the last of those cues starts.
    let mut best: Vec<Option<((usize, usize), usize)>> = vec![None; sentence.len() + 1];
    best[0] = Some(((0, 0), 0));
    for end in 1..=sentence.len() {
        for start in (0..end).rev() {
            let range = sentence.start + start..sentence.start + end;
            let text = text_of(chars, words, range.clone(), 0).0;
            let lasts = words[range.end - 1].end_s - words[range.start].start_s;
            if end - start > 1 && (lasts > MAX_CUE_S || !fits(&text)) {
                // Starting earlier only makes the cue longer.
                break;
            }
            let Some(((cues, unevenness), _)) = best[start] else {
                continue;
            };
            let slack = room.saturating_sub(text.chars().count());
            let cut_in_phrase = end < sentence.len() && !ends_clause(chars, words, range.end);
            let score = (
                cues + 1,
                unevenness + slack * slack + usize::from(cut_in_phrase) * PHRASE_CUT_COST,
            );
            if best[end].is_none_or(|(known, _)| score < known) {
                best[end] = Some((score, start));
            }
        }
    }
    let mut groups = Vec::new();
    let mut end = sentence.len();
    while end > 0 {
        let (_, start) = best[end].expect("every prefix can be cut into cues");
        groups.push(sentence.start + start..sentence.start + end);
        end = start;
    }
    groups.reverse();
    groups
}

/// Whether a clause's punctuation stands between `words[next - 1]` and `words[next]`.
fn ends_clause(chars: &[char], words: &[WordStamp], next: usize) -> bool {
    let from = words[next - 1].char_end.min(words[next].char_start);
    chars[from..words[next].char_start]
        .iter()
        .any(|c| CLAUSE_ENDS.contains(c))
}

/// The input's text of `words[range]`, with the punctuation attached to its first and last
/// words, whitespace runs as single spaces; and the character position after it. Nothing
/// before `taken` (the previous cue's text) is taken again.
fn text_of(
    chars: &[char],
    words: &[WordStamp],
    range: Range<usize>,
    taken: usize,
) -> (String, usize) {
    let (first, last) = (&words[range.start], &words[range.end - 1]);
    let floor = range
        .start
        .checked_sub(1)
        .map_or(0, |i| words[i].char_end)
        .max(taken)
        .min(first.char_start);
    let ceiling = words.get(range.end).map_or(chars.len(), |w| w.char_start);
    let mut from = first.char_start;
    while from > floor && !chars[from - 1].is_whitespace() {
        from -= 1;
    }
    let mut to = last.char_end;
    while to < ceiling && !chars[to].is_whitespace() {
        to += 1;
    }
    let mut text = String::new();
    let mut at = from;
    for word in &words[range] {
        if word.char_start < word.char_end {
            text.extend(&chars[at.min(word.char_start)..word.char_end]);
        } else {
            // Not found in the input (normalization changed it): its spoken spelling.
            text.extend(&chars[at.min(word.char_start)..word.char_start]);
            let _ = write!(text, " {} ", word.word);
        }
        at = at.max(word.char_end);
    }
    text.extend(&chars[at.min(to)..to]);
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    (text, to)
}

/// Whether `text` fits in one cue.
fn fits(text: &str) -> bool {
    let lines = wrap(text);
    lines.len() <= MAX_LINES
        && lines
            .iter()
            .all(|line| line.chars().count() <= MAX_LINE_CHARS)
}

/// `text` as one line, or as two (never more) at the space that makes the longer one shortest (the top
/// one the shorter on a tie, as captions are usually set).
fn wrap(text: &str) -> Vec<String> {
    let length = text.chars().count();
    if length <= MAX_LINE_CHARS {
        return vec![text.to_string()];
    }
    let split = text
        .char_indices()
        .enumerate()
        .filter(|(_, (_, c))| *c == ' ')
        .min_by_key(|&(chars_before, _)| {
            let (top, bottom) = (chars_before, length - chars_before - 1);
            (top.max(bottom), top > bottom)
        });
    match split {
        Some((_, (at, _))) => vec![text[..at].to_string(), text[at + 1..].to_string()],
        None => vec![text.to_string()],
    }
}

/// The cues as a file in `format`.
fn render(format: SubtitleFormat, cues: &[Cue]) -> String {
    let mut out = String::new();
    if format == SubtitleFormat::Vtt {
        out.push_str("WEBVTT\n\n");
    }
    for (i, cue) in cues.iter().enumerate() {
        let (start, end) = (timestamp(format, cue.start_s), timestamp(format, cue.end_s));
        match format {
            SubtitleFormat::Srt => {
                let _ = writeln!(out, "{}\n{start} --> {end}", i + 1);
                for line in &cue.lines {
                    let _ = writeln!(out, "{line}");
                }
            }
            SubtitleFormat::Vtt => {
                let _ = writeln!(out, "{start} --> {end}");
                for line in &cue.lines {
                    let _ = writeln!(out, "{}", escape_vtt(line));
                }
            }
        }
        out.push('\n');
    }
    out
}

/// `HH:MM:SS,mmm` (SubRip) or `HH:MM:SS.mmm` (WebVTT), to the nearest millisecond.
fn timestamp(format: SubtitleFormat, seconds: f64) -> String {
    let ms = (seconds.max(0.0) * 1000.0).round() as u64;
    let separator = match format {
        SubtitleFormat::Srt => ',',
        SubtitleFormat::Vtt => '.',
    };
    format!(
        "{:02}:{:02}:{:02}{separator}{:03}",
        ms / 3_600_000,
        ms / 60_000 % 60,
        ms / 1000 % 60,
        ms % 1000
    )
}

/// Cue text in WebVTT is markup: `&` and `<` would start entities and tags, and `>` could end
/// up in `-->`, so all three are written as character references.
fn escape_vtt(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    for c in line.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The words of `input` (runs of letters, digits and inner `'.$%`), each lasting `each` s,
    /// back to back from 0.1 s; a new sentence after `.`, `!` or `?` behind a 0.2 s pause.
    fn stamps(input: &str, each: f64) -> Vec<WordStamp> {
        let chars: Vec<char> = input.chars().collect();
        let is_word = |c: char| c.is_alphanumeric() || "'’$%".contains(c);
        let (mut words, mut at, mut time, mut sentence) = (Vec::new(), 0, 0.1, 0);
        while at < chars.len() {
            if !is_word(chars[at]) {
                if ".!?".contains(chars[at]) && !words.is_empty() {
                    let last: &WordStamp = words.last().unwrap();
                    if last.sentence == sentence {
                        sentence += 1;
                        time += 0.2;
                    }
                }
                at += 1;
                continue;
            }
            let start = at;
            while at < chars.len() && is_word(chars[at]) {
                at += 1;
            }
            words.push(WordStamp {
                word: chars[start..at].iter().collect(),
                start_s: time,
                end_s: time + each,
                char_start: start,
                char_end: at,
                sentence,
            });
            time += each;
        }
        words
    }

    fn texts(cues: &[Cue]) -> Vec<String> {
        cues.iter().map(|c| c.lines.join("\n")).collect()
    }

    #[test]
    fn times_are_written_as_each_format_wants() {
        let srt = |s| timestamp(SubtitleFormat::Srt, s);
        let vtt = |s| timestamp(SubtitleFormat::Vtt, s);
        assert_eq!(srt(0.0), "00:00:00,000");
        assert_eq!(vtt(0.0), "00:00:00.000");
        assert_eq!(srt(1.2345), "00:00:01,235");
        assert_eq!(vtt(61.0004), "00:01:01.000");
        assert_eq!(vtt(3599.9996), "01:00:00.000");
        assert_eq!(srt(3723.042), "01:02:03,042");
        assert_eq!(vtt(-0.1), "00:00:00.000");
    }

    #[test]
    fn sentences_never_share_a_cue_and_keep_their_punctuation() {
        let input = "“Hello,” she said. Really?! Yes — (twice)…  Done";
        let words = stamps(input, 0.3);
        let cues = cues(input, &words, 10.0);
        assert_eq!(
            texts(&cues),
            ["“Hello,” she said.", "Really?!", "Yes — (twice)… Done"]
        );
    }

    #[test]
    fn cues_are_in_order_never_overlap_and_linger_only_into_silence() {
        let input = "One two three. Four five six seven eight nine ten eleven twelve thirteen.";
        let words = stamps(input, 0.6);
        let duration = words.last().unwrap().end_s + 0.3;
        let cues = cues(input, &words, duration);
        assert!(cues.len() >= 3, "{cues:?}");
        for pair in cues.windows(2) {
            assert!(pair[0].end_s <= pair[1].start_s, "{pair:?}");
        }
        // The first sentence's cue lingers into the 0.2 s pause but not past the next cue.
        assert_eq!(cues[0].end_s, cues[1].start_s);
        assert!(cues[0].end_s > words[2].end_s);
        // The last stays up after its word, but not past the audio.
        let last = cues.last().unwrap();
        assert_eq!(last.end_s, duration);
        for cue in &cues {
            assert!(cue.end_s - cue.start_s <= MAX_CUE_S + 1e-9, "{cue:?}");
            assert!(cue.start_s < cue.end_s);
        }
    }

    #[test]
    fn long_sentences_are_cut_by_duration_and_by_line_length() {
        // Slow words: the duration limit cuts first.
        let slow = "aa bb cc dd ee ff gg hh ii jj kk ll";
        let words = stamps(slow, 1.0);
        let slow_cues = cues(slow, &words, 20.0);
        assert!(slow_cues.len() >= 3, "{slow_cues:?}");
        for cue in &slow_cues {
            assert!(cue.end_s - cue.start_s <= MAX_CUE_S + 1e-9, "{cue:?}");
        }
        // Fast words: two lines of 42 characters are the limit.
        let fast = "The quick brown fox jumps over the lazy dog while the cat watches \
                    from the window and the bird sings in the old oak tree by the river";
        let words = stamps(fast, 0.05);
        let fast_cues = cues(fast, &words, 20.0);
        assert!(fast_cues.len() >= 2, "{fast_cues:?}");
        for cue in &fast_cues {
            assert!(cue.lines.len() <= MAX_LINES, "{cue:?}");
            for line in &cue.lines {
                assert!(line.chars().count() <= MAX_LINE_CHARS, "{line:?}");
            }
        }
        // As few cues as fit, and even: 133 characters make two of about half each.
        let lengths: Vec<usize> = texts(&fast_cues)
            .iter()
            .map(|t| t.chars().count())
            .collect();
        assert_eq!(lengths.len(), 2, "{fast_cues:?}");
        assert!(lengths[0].abs_diff(lengths[1]) <= 12, "{fast_cues:?}");
        // Every word, once, in order.
        let all: Vec<String> = fast_cues
            .iter()
            .flat_map(|c| c.lines.iter())
            .flat_map(|l| l.split(' '))
            .map(str::to_string)
            .collect();
        assert_eq!(all.join(" "), fast);
    }

    #[test]
    fn a_sentence_cut_in_cues_leaves_no_word_alone() {
        // Filled one after the other, twelve words would fill the first cue and leave one.
        let input = (1..=13)
            .map(|i| format!("word{i:02}"))
            .collect::<Vec<_>>()
            .join(" ");
        let cues = cues(&input, &stamps(&input, 0.1), 5.0);
        let counts: Vec<usize> = texts(&cues)
            .iter()
            .map(|t| t.split_whitespace().count())
            .collect();
        assert_eq!(counts.len(), 2, "{cues:?}");
        assert!(counts[0].abs_diff(counts[1]) <= 1, "{counts:?}");
    }

    #[test]
    fn a_long_sentence_is_cut_after_a_clause_when_that_is_about_as_even() {
        let input = "Tomorrow morning we travel north to the old mountains, and then we walk for \
                     many long days";
        let words = stamps(input, 0.05);
        let cues = cues(input, &words, 20.0);
        assert_eq!(
            texts(&cues),
            [
                "Tomorrow morning we travel\nnorth to the old mountains,",
                "and then we walk for many long days"
            ]
        );
    }

    #[test]
    fn lines_are_balanced_and_a_lone_long_word_still_gets_its_cue() {
        assert_eq!(wrap("short line"), ["short line"]);
        // The longer line as short as a split can make it...
        assert_eq!(
            wrap("one two three four five six seven eight nine"),
            ["one two three four five", "six seven eight nine"]
        );
        // ...and of two such splits, the one with the shorter top line.
        let (a, c) = ("a".repeat(21), "c".repeat(21));
        assert_eq!(wrap(&format!("{a} bb {c}")), [a.clone(), format!("bb {c}")]);
        let long = "x".repeat(60);
        let input = format!("see {long} here");
        let cues = cues(&input, &stamps(&input, 0.2), 5.0);
        assert_eq!(texts(&cues), ["see", long.as_str(), "here"]);
    }

    #[test]
    fn files_have_their_headers_numbers_and_escapes() {
        let input = "Fish & chips <b>cost</b> 5 > 4. Next!";
        let words = stamps(input, 0.25);
        let cues = cues(input, &words, 5.0);
        let vtt = render(SubtitleFormat::Vtt, &cues);
        let srt = render(SubtitleFormat::Srt, &cues);
        let (t0, t1) = (
            timestamp(SubtitleFormat::Vtt, cues[0].start_s),
            timestamp(SubtitleFormat::Vtt, cues[0].end_s),
        );
        assert!(vtt.starts_with(&format!(
            "WEBVTT\n\n{t0} --> {t1}\nFish &amp; chips &lt;b&gt;cost&lt;/b&gt;"
        )));
        assert!(!vtt.contains(" > ") && !vtt.contains('<'));
        assert!(srt.starts_with(&format!(
            "1\n{} --> {}\nFish & chips <b>cost</b>",
            t0.replace('.', ","),
            t1.replace('.', ",")
        )));
        assert!(srt.contains("\n\n2\n"));
        assert!(srt.ends_with("Next!\n\n") && vtt.ends_with("Next!\n\n"));
        assert_eq!(render(SubtitleFormat::Vtt, &[]), "WEBVTT\n\n");
    }

    #[test]
    fn words_missing_from_the_input_keep_their_spoken_spelling() {
        let input = "Call me tomorrow";
        let mut words = stamps(input, 0.3);
        // As the finder reports a word it could not find: an empty range where it stood.
        words.insert(
            2,
            WordStamp {
                word: "please".into(),
                start_s: words[1].end_s,
                end_s: words[1].end_s + 0.1,
                char_start: words[1].char_end,
                char_end: words[1].char_end,
                sentence: 0,
            },
        );
        for w in &mut words[3..] {
            w.start_s += 0.1;
            w.end_s += 0.1;
        }
        assert_eq!(
            texts(&cues(input, &words, 5.0)),
            ["Call me please tomorrow"]
        );
    }
}

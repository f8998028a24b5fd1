//! Safe access to the system's libespeak-ng (1.51), which both engines need: Piper voices are
//! trained on its IPA output, and the `espeak` engine speaks with its formant synthesizer.
//!
//! The library is a bag of process-wide globals (selected voice, rate, phoneme buffers, one synth
//! callback), so every call here runs under one process-wide lock, and the library is initialized
//! lazily on first use. That lock is held for a whole synthesis, so the voice list, which
//! request validation reads, is read once and kept outside it: asking which voices exist never
//! waits for a synthesis. The `extern "C"` declarations are written by hand from
//! `espeak-ng/speak_lib.h`; the handful of calls used does not justify a bindgen/clang build step.

use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_short, c_uint, c_void, CStr, CString};
use std::sync::OnceLock;

use parking_lot::{Mutex, MutexGuard};

mod ffi {
    use super::*;

    pub const AUDIO_OUTPUT_SYNCHRONOUS: c_int = 2;
    /// Without it espeak calls `exit()` when its data directory is missing.
    pub const INITIALIZE_DONT_EXIT: c_int = 0x8000;
    pub const CHARS_UTF8: c_int = 1;
    pub const PHONEMES_IPA: c_int = 0x02;
    /// With a tie character (bits 8..23) between the letters of one multi-letter phoneme.
    pub const PHONEMES_TIE: c_int = 0x80;
    pub const POS_CHARACTER: c_int = 1;
    pub const PARAM_RATE: c_int = 1;
    /// Text within `[[ ]]` is espeak's own phoneme names, not words.
    pub const PHONEMES_INPUT: c_uint = 0x100;
    pub const EE_OK: c_int = 0;

    #[repr(C)]
    pub struct Voice {
        pub name: *const c_char,
        /// Sequence of (priority byte, NUL-terminated language) ending with a zero priority.
        pub languages: *const c_char,
        pub identifier: *const c_char,
        pub gender: u8,
        pub age: u8,
        pub variant: u8,
        pub xx1: u8,
        pub score: c_int,
        pub spare: *mut c_void,
    }

    #[repr(C)]
    pub union EventId {
        pub number: c_int,
        pub name: *const c_char,
        pub string: [c_char; 8],
    }

    #[repr(C)]
    pub struct Event {
        pub kind: c_int,
        pub unique_identifier: c_uint,
        pub text_position: c_int,
        pub length: c_int,
        pub audio_position: c_int,
        pub sample: c_int,
        pub user_data: *mut c_void,
        pub id: EventId,
    }

    pub type SynthCallback = extern "C" fn(*mut c_short, c_int, *mut Event) -> c_int;

    #[link(name = "espeak-ng")]
    extern "C" {
        pub fn espeak_Initialize(
            output: c_int,
            buflength: c_int,
            path: *const c_char,
            options: c_int,
        ) -> c_int;
        pub fn espeak_ListVoices(voice_spec: *mut Voice) -> *mut *const Voice;
        pub fn espeak_SetVoiceByName(name: *const c_char) -> c_int;
        pub fn espeak_TextToPhonemes(
            textptr: *mut *const c_void,
            textmode: c_int,
            phonememode: c_int,
        ) -> *const c_char;
        pub fn espeak_SetSynthCallback(callback: SynthCallback);
        pub fn espeak_SetParameter(parameter: c_int, value: c_int, relative: c_int) -> c_int;
        pub fn espeak_Synth(
            text: *const c_void,
            size: usize,
            position: c_uint,
            position_type: c_int,
            end_position: c_uint,
            flags: c_uint,
            unique_identifier: *mut c_uint,
            user_data: *mut c_void,
        ) -> c_int;
        pub fn espeak_Synchronize() -> c_int;
    }
}

/// Sample rate of everything espeak-ng synthesizes.
pub const SAMPLE_RATE: u32 = 22050;
/// espeak's own speaking rate, words per minute; `speed` 1.0 maps to it.
pub const RATE_NORMAL_WPM: u32 = 175;
/// The rate range espeak accepts (`espeakRATE_MINIMUM..=espeakRATE_MAXIMUM`).
pub const RATE_RANGE_WPM: std::ops::RangeInclusive<u32> = 80..=450;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EspeakError {
    #[error("espeak-ng could not be initialized (is espeak-ng-data installed?)")]
    Init,
    #[error("unknown espeak-ng voice '{0}'")]
    UnknownVoice(String),
    #[error("espeak-ng call {call} failed with code {code}")]
    Call { call: &'static str, code: i32 },
}

/// A voice as espeak-ng lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EspeakVoice {
    /// The name to select it by, lowercase (`en-us`, `de`, `fr`): the file name of the voice,
    /// which is what `espeak-ng -v` and Piper voice configs use.
    pub name: String,
    /// Human-readable name (`English (America)`).
    pub display_name: String,
    /// espeak's language codes for the voice, most preferred first (`en-us`, `en`).
    pub languages: Vec<String>,
}

struct Library {
    voices: Vec<EspeakVoice>,
    /// Voice currently loaded in the library; `None` after a failed switch, when the library
    /// may have no usable voice at all (phonemizing then would crash inside espeak).
    current_voice: Option<String>,
}

static LIBRARY: Mutex<Option<Library>> = Mutex::new(None);

/// Locks the library, initializing it on first use. A panic while the lock was held cannot
/// leave espeak half-updated from our side (every call is a single FFI call), and the lock
/// (parking_lot's) does not poison, so one panic never fails every later call.
fn library() -> Result<MutexGuard<'static, Option<Library>>, EspeakError> {
    let mut guard = LIBRARY.lock();
    if guard.is_none() {
        // SAFETY: called under the lock, with a NULL data path (the system default).
        let rate = unsafe {
            ffi::espeak_Initialize(
                ffi::AUDIO_OUTPUT_SYNCHRONOUS,
                0,
                std::ptr::null(),
                ffi::INITIALIZE_DONT_EXIT,
            )
        };
        if rate <= 0 {
            return Err(EspeakError::Init);
        }
        // SAFETY: the library is initialized; the callback lives for the whole program.
        unsafe { ffi::espeak_SetSynthCallback(collect_samples) };
        *guard = Some(Library {
            voices: read_voice_list(),
            current_voice: None,
        });
    }
    Ok(guard)
}

fn read_voice_list() -> Vec<EspeakVoice> {
    let mut voices: Vec<EspeakVoice> = Vec::new();
    // SAFETY: espeak returns a NULL-terminated array of pointers to voices it owns; everything is
    // copied out before the lock is released.
    unsafe {
        let list = ffi::espeak_ListVoices(std::ptr::null_mut());
        if list.is_null() {
            return voices;
        }
        let mut entry = list;
        while !(*entry).is_null() {
            let voice = &**entry;
            entry = entry.add(1);
            if voice.identifier.is_null() {
                continue;
            }
            let identifier = CStr::from_ptr(voice.identifier).to_string_lossy();
            let name = identifier
                .rsplit('/')
                .next()
                .unwrap_or(&identifier)
                .to_lowercase();
            if voices.iter().any(|v| v.name == name) {
                continue;
            }
            let display_name = if voice.name.is_null() {
                name.clone()
            } else {
                CStr::from_ptr(voice.name).to_string_lossy().into_owned()
            };
            voices.push(EspeakVoice {
                name,
                display_name,
                languages: read_languages(voice.languages),
            });
        }
    }
    voices
}

/// Parses espeak's `languages` field: (priority byte, NUL-terminated name)* then a 0 byte.
///
/// # Safety
/// `ptr` is NULL or points to such a field, as espeak's voice list holds it, and the list
/// stays alive and unchanged during the call (it is read under the library's lock).
unsafe fn read_languages(mut ptr: *const c_char) -> Vec<String> {
    let mut languages = Vec::new();
    if ptr.is_null() {
        return languages;
    }
    // SAFETY: by the contract, every byte read here lies inside the field: each entry is a
    // priority byte and a NUL-terminated name, and the field ends with a 0 priority byte.
    unsafe {
        while *ptr != 0 {
            let name = CStr::from_ptr(ptr.add(1));
            ptr = ptr.add(1 + name.to_bytes().len() + 1);
            languages.push(name.to_string_lossy().into_owned());
        }
    }
    languages
}

impl Library {
    /// Makes `voice` the library's current voice. Only names from espeak's own list are passed
    /// on: for names it does not know, `espeak_SetVoiceByName` can leave the library without a
    /// voice, and a later `espeak_TextToPhonemes` then crashes.
    fn select_voice(&mut self, voice: &str) -> Result<(), EspeakError> {
        let wanted = voice.to_lowercase();
        if self.current_voice.as_deref() == Some(wanted.as_str()) {
            return Ok(());
        }
        if !self.voices.iter().any(|v| v.name == wanted) {
            return Err(EspeakError::UnknownVoice(voice.to_string()));
        }
        let c_name = CString::new(wanted.as_str())
            .map_err(|_| EspeakError::UnknownVoice(voice.to_string()))?;
        self.current_voice = None;
        // SAFETY: the library is initialized and the string outlives the call.
        let code = unsafe { ffi::espeak_SetVoiceByName(c_name.as_ptr()) };
        if code != ffi::EE_OK {
            return Err(EspeakError::Call {
                call: "espeak_SetVoiceByName",
                code,
            });
        }
        self.current_voice = Some(wanted);
        Ok(())
    }
}

/// Every voice espeak-ng offers (empty if the library cannot be initialized). The installed
/// voices do not change while the process runs, so the list is read once, under the library
/// lock, and every later call answers without taking it.
pub fn list_voices() -> &'static [EspeakVoice] {
    // Lock order is always VOICES, then LIBRARY: `library()` never touches VOICES.
    static VOICES: OnceLock<Vec<EspeakVoice>> = OnceLock::new();
    VOICES.get_or_init(|| match library() {
        Ok(guard) => guard.as_ref().map(|l| l.voices.clone()).unwrap_or_default(),
        Err(_) => Vec::new(),
    })
}

/// The espeak-ng voice for a language tag (`de`, `pt-BR`, `en_GB`): one that lists exactly
/// that language, else the first of the tag's primary language.
pub fn voice_of_language(tag: &str) -> Option<&'static str> {
    let tag = tag.replace('_', "-").to_lowercase();
    let primary = tag.split('-').next().unwrap_or_default();
    let voices = list_voices();
    let exact = voices
        .iter()
        .find(|v| v.name == tag || v.languages.contains(&tag));
    exact
        .or_else(|| {
            voices.iter().find(|v| {
                v.name == primary
                    || v.languages
                        .iter()
                        .any(|l| l.split('-').next() == Some(primary))
            })
        })
        .map(|v| v.name.as_str())
}

/// The characters that end a clause and that Piper voices were trained to see in the phoneme
/// stream.
pub const CLAUSE_PUNCTUATION: &[char] = &[',', '.', ';', ':', '!', '?'];

/// Phonemizes `text` with `voice`, returning one entry per clause as espeak-ng splits them: the
/// IPA (stress marks, words separated by single spaces) and the punctuation that ended the
/// clause in the source text, if any of [`CLAUSE_PUNCTUATION`].
///
/// Stock espeak-ng 1.51 drops clause punctuation from its phoneme output and has no call that
/// reports it, so it is recovered from the source: after each call the text pointer sits just
/// past the next clause's start (espeak reads one character ahead, sometimes stops on the space
/// before it), and the terminator is the punctuation at the end of the consumed slice.
pub fn text_to_phoneme_clauses(
    text: &str,
    voice: &str,
) -> Result<Vec<(String, Option<char>)>, EspeakError> {
    phoneme_clauses(text, voice, ffi::PHONEMES_IPA)
}

/// The tie espeak-ng puts between the letters of one phoneme in
/// [`text_to_tied_phoneme_clauses`]: U+0361, IPA's own tie bar.
pub const TIE: char = '\u{361}';

/// [`text_to_phoneme_clauses`] with [`TIE`] between the letters of every multi-letter phoneme
/// (`a͡ɪ`, `t͡ʃ`). Without it a mapping onto another phoneme set cannot tell one phoneme from
/// two: the `tʃ` of "nutshell" is `t` then `ʃ`, that of "chew" is one affricate `t͡ʃ`.
/// Removing the ties gives exactly the untied output.
pub fn text_to_tied_phoneme_clauses(
    text: &str,
    voice: &str,
) -> Result<Vec<(String, Option<char>)>, EspeakError> {
    let mode = ffi::PHONEMES_IPA | ffi::PHONEMES_TIE | ((TIE as c_int) << 8);
    phoneme_clauses(text, voice, mode)
}

/// Between the phonemes of [`phoneme_names`]' two passes: a character neither IPA nor espeak's
/// phoneme names use.
const NAME_SEPARATOR: char = '\u{2016}';

/// Every phoneme `voice` says for `text`, in order, each as a pair: its IPA (as
/// [`text_to_phoneme_clauses`] writes it) and espeak's own name for it, the name that
/// [`synthesize_with_words`] takes as phoneme input (`ʃ` and `S`, `oʊ` and `oU`). Stress marks
/// are pairs of their own (`ˈ` and `'`). The names differ per language, and espeak has no call
/// that lists them, so this reads them off one text phonemized twice, once in each alphabet,
/// with a separator between phonemes; words where the two passes disagree in length, and words
/// read in another language (espeak marks a switch with `(xx)`), are left out.
pub fn phoneme_names(text: &str, voice: &str) -> Result<Vec<(String, String)>, EspeakError> {
    let separator = (NAME_SEPARATOR as c_int) << 8;
    let ipa = phoneme_clauses(text, voice, ffi::PHONEMES_IPA | separator)?;
    let names = phoneme_clauses(text, voice, separator)?;
    let words = |clauses: Vec<(String, Option<char>)>| -> Vec<String> {
        let mut words = Vec::new();
        let mut switched = false;
        for (clause, _) in clauses {
            for word in clause.split(' ') {
                // A switch to another language and the switch back are both marked.
                if word.contains('(') {
                    switched = !switched;
                    continue;
                }
                words.push(if switched {
                    String::new()
                } else {
                    word.to_string()
                });
            }
        }
        words
    };
    let (ipa, names) = (words(ipa), words(names));
    let mut pairs = Vec::new();
    if ipa.len() != names.len() {
        return Ok(pairs);
    }
    let split = |word: &str| -> Vec<String> {
        let mut phonemes = Vec::new();
        for phoneme in word.split(NAME_SEPARATOR).filter(|p| !p.is_empty()) {
            let stress: String = phoneme.chars().take_while(|c| is_stress(*c)).collect();
            phonemes.extend(stress.chars().map(String::from));
            let rest = &phoneme[stress.len()..];
            if !rest.is_empty() {
                phonemes.push(rest.to_string());
            }
        }
        phonemes
    };
    for (ipa, names) in ipa.iter().zip(&names) {
        let (ipa, names) = (split(ipa), split(names));
        if ipa.len() == names.len() {
            pairs.extend(ipa.into_iter().zip(names));
        }
    }
    Ok(pairs)
}

/// The stress marks both alphabets put before a stressed vowel.
fn is_stress(c: char) -> bool {
    matches!(c, 'ˈ' | 'ˌ' | '\'' | ',')
}

fn phoneme_clauses(
    text: &str,
    voice: &str,
    phoneme_mode: c_int,
) -> Result<Vec<(String, Option<char>)>, EspeakError> {
    let mut guard = library()?;
    let library = guard.as_mut().ok_or(EspeakError::Init)?;
    library.select_voice(voice)?;

    let source = c_text(text);
    let bytes = source.as_bytes();
    let base = source.as_ptr();
    let mut clauses = Vec::new();
    let mut cursor: *const c_void = base.cast();
    let mut clause_start = 0usize;
    let mut previous_end = 0usize;
    while !cursor.is_null() {
        // SAFETY: `cursor` points into `source` (NUL-terminated, alive for the loop); espeak
        // advances it within the string or sets it to NULL at the end.
        let phonemes =
            unsafe { ffi::espeak_TextToPhonemes(&mut cursor, ffi::CHARS_UTF8, phoneme_mode) };
        let consumed_end = if cursor.is_null() {
            bytes.len()
        } else {
            (cursor as usize - base as usize).min(bytes.len())
        };
        let consumed =
            String::from_utf8_lossy(&bytes[clause_start.min(consumed_end)..consumed_end]);
        let ipa = if phonemes.is_null() {
            String::new()
        } else {
            // SAFETY: espeak returns a NUL-terminated string valid until its next call.
            let raw = unsafe { CStr::from_ptr(phonemes) }.to_string_lossy();
            raw.split_whitespace().collect::<Vec<_>>().join(" ")
        };
        clauses.push((ipa, clause_terminator(&consumed)));
        // The look-ahead character belongs to the next clause.
        if !cursor.is_null() && consumed_end <= previous_end {
            break; // espeak made no progress; never loop forever on odd input
        }
        previous_end = consumed_end;
        clause_start = previous_char_boundary(bytes, consumed_end);
    }
    Ok(clauses)
}

/// espeak needs a C string; an interior NUL would silently cut the text, so it becomes a space.
fn c_text(text: &str) -> CString {
    CString::new(text.replace('\0', " ")).unwrap_or_default()
}

fn previous_char_boundary(bytes: &[u8], end: usize) -> usize {
    let mut index = end.saturating_sub(1);
    while index > 0 && (bytes[index] & 0xC0) == 0x80 {
        index -= 1;
    }
    index
}

/// The clause punctuation ending `consumed` (a clause's source text plus possibly one character
/// of look-ahead): skips that look-ahead character, then spaces and closing quotes/brackets, and
/// returns the first character of the punctuation run found there ("?!" → '?').
fn clause_terminator(consumed: &str) -> Option<char> {
    let is_closer = |c: char| {
        c.is_whitespace() || matches!(c, '"' | '\'' | ')' | ']' | '}' | '»' | '”' | '’' | '«')
    };
    let mut rest = consumed;
    if let Some(last) = rest.chars().next_back() {
        if !is_closer(last) && !CLAUSE_PUNCTUATION.contains(&last) {
            rest = &rest[..rest.len() - last.len_utf8()];
        }
    }
    let rest = rest.trim_end_matches(|c: char| is_closer(c) || matches!(c, '(' | '[' | '“' | '‘'));
    let run_start = rest
        .trim_end_matches(|c: char| CLAUSE_PUNCTUATION.contains(&c))
        .len();
    rest[run_start..].chars().next()
}

thread_local! {
    /// Samples and word events of the synthesis running on this thread. espeak calls the synth
    /// callback on the caller's thread in synchronous mode, and the global lock guarantees that
    /// only one synthesis runs at a time, so this is never shared.
    static SYNTH_OUTPUT: RefCell<(Vec<i16>, Vec<SpokenWord>)> =
        const { RefCell::new((Vec::new(), Vec::new())) };
}

/// espeak's event for the start of a spoken word.
const EVENT_WORD: c_int = 1;
const EVENT_LIST_TERMINATED: c_int = 0;

/// Where espeak started speaking a word of the text it was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpokenWord {
    /// The word's first character in the text, counted in characters from 0.
    pub char_start: usize,
    /// Its length in characters.
    pub chars: usize,
    /// The sample at which espeak starts speaking it.
    pub sample: usize,
}

extern "C" fn collect_samples(wav: *mut c_short, count: c_int, events: *mut ffi::Event) -> c_int {
    let mut words = Vec::new();
    let mut event = events;
    // SAFETY: espeak passes an array of events ended by a LIST_TERMINATED one (or NULL).
    while !event.is_null() && unsafe { (*event).kind } != EVENT_LIST_TERMINATED {
        // SAFETY: `event` is non-NULL and before the terminator, so inside espeak's array.
        let e = unsafe { &*event };
        if e.kind == EVENT_WORD && e.text_position > 0 {
            words.push(SpokenWord {
                char_start: e.text_position as usize - 1,
                chars: e.length.max(0) as usize,
                sample: (e.audio_position.max(0) as u64 * u64::from(SAMPLE_RATE) / 1000) as usize,
            });
        }
        // SAFETY: still within the terminated array.
        event = unsafe { event.add(1) };
    }
    let samples = if wav.is_null() || count <= 0 {
        &[][..]
    } else {
        // SAFETY: espeak hands us `count` valid samples for the duration of the call.
        unsafe { std::slice::from_raw_parts(wav, count as usize) }
    };
    SYNTH_OUTPUT.with(|output| {
        if let Ok(mut output) = output.try_borrow_mut() {
            output.0.extend_from_slice(samples);
            output.1.extend(words);
        }
    });
    0 // continue synthesis
}

/// espeak's rate for a speed factor: 175 wpm × speed, clamped to espeak's 80..=450 wpm. Speeds
/// outside ≈0.46..=2.57 are therefore not honoured exactly (no time-stretching is done).
pub fn rate_for_speed(speed: f32) -> u32 {
    let wpm = (RATE_NORMAL_WPM as f32 * speed).round();
    let wpm = if wpm.is_finite() {
        wpm as u32
    } else {
        RATE_NORMAL_WPM
    };
    wpm.clamp(*RATE_RANGE_WPM.start(), *RATE_RANGE_WPM.end())
}

/// Speaks `text` with espeak's formant synthesizer at `rate_wpm` (clamped to 80..=450) and
/// returns 16-bit mono samples at [`SAMPLE_RATE`].
pub fn synthesize(text: &str, voice: &str, rate_wpm: u32) -> Result<Vec<i16>, EspeakError> {
    synthesize_with_words(text, voice, rate_wpm).map(|(samples, _)| samples)
}

/// [`synthesize`], with where each word of `text` starts in the samples, in order.
pub fn synthesize_with_words(
    text: &str,
    voice: &str,
    rate_wpm: u32,
) -> Result<(Vec<i16>, Vec<SpokenWord>), EspeakError> {
    synthesize_input(text, voice, rate_wpm, 0)
}

/// [`synthesize_with_words`] where the stretches of `text` within `[[ ]]` are phonemes in
/// espeak's own names ([`phoneme_names`]), not words. Only text whose every `[[` the caller
/// put there may come here.
pub fn synthesize_with_phonemes(
    text: &str,
    voice: &str,
    rate_wpm: u32,
) -> Result<(Vec<i16>, Vec<SpokenWord>), EspeakError> {
    synthesize_input(text, voice, rate_wpm, ffi::PHONEMES_INPUT)
}

fn synthesize_input(
    text: &str,
    voice: &str,
    rate_wpm: u32,
    flags: c_uint,
) -> Result<(Vec<i16>, Vec<SpokenWord>), EspeakError> {
    let mut guard = library()?;
    let library = guard.as_mut().ok_or(EspeakError::Init)?;
    synthesize_locked(library, text, voice, rate_wpm, flags)
}

/// The IPA of the phonemes espeak says for `text` given as [`synthesize_with_phonemes`]
/// takes it, from espeak's phoneme trace: what shows that phonemes given in espeak's names are
/// said as the IPA they were spelt from.
#[cfg(test)]
pub fn phonemes_said(text: &str, voice: &str) -> Result<String, EspeakError> {
    use std::io::{Read, Seek};
    use std::os::fd::AsRawFd;

    extern "C" {
        fn espeak_SetPhonemeTrace(phonememode: c_int, stream: *mut libc::FILE);
    }
    let mut guard = library()?;
    let library = guard.as_mut().ok_or(EspeakError::Init)?;
    let mut file = tempfile::tempfile().map_err(|_| EspeakError::Init)?;
    // SAFETY: the stream wraps a fresh duplicate of the file's descriptor, open for writing;
    // it is closed below, after tracing is switched off.
    let stream = unsafe { libc::fdopen(libc::dup(file.as_raw_fd()), c"w".as_ptr()) };
    assert!(!stream.is_null(), "fdopen failed");
    // SAFETY: espeak writes to the stream only while it synthesizes, under the lock held here.
    unsafe { espeak_SetPhonemeTrace(ffi::PHONEMES_IPA, stream) };
    let said = synthesize_locked(library, text, voice, RATE_NORMAL_WPM, ffi::PHONEMES_INPUT);
    // SAFETY: tracing is off before the stream is closed; the stream is ours.
    unsafe {
        espeak_SetPhonemeTrace(0, std::ptr::null_mut());
        libc::fclose(stream);
    }
    said?;
    let mut trace = String::new();
    file.rewind()
        .and_then(|_| file.read_to_string(&mut trace))
        .map_err(|_| EspeakError::Init)?;
    Ok(trace.split_whitespace().collect::<Vec<_>>().join(" "))
}

fn synthesize_locked(
    library: &mut Library,
    text: &str,
    voice: &str,
    rate_wpm: u32,
    flags: c_uint,
) -> Result<(Vec<i16>, Vec<SpokenWord>), EspeakError> {
    library.select_voice(voice)?;

    let rate = rate_wpm.clamp(*RATE_RANGE_WPM.start(), *RATE_RANGE_WPM.end());
    // SAFETY: plain parameter setter on the initialized library.
    let code = unsafe { ffi::espeak_SetParameter(ffi::PARAM_RATE, rate as c_int, 0) };
    if code != ffi::EE_OK {
        return Err(EspeakError::Call {
            call: "espeak_SetParameter",
            code,
        });
    }

    SYNTH_OUTPUT.with(|output| *output.borrow_mut() = Default::default());
    let source = c_text(text);
    let size = source.as_bytes_with_nul().len();
    // SAFETY: synchronous mode: espeak reads `source` and calls `collect_samples` on this
    // thread before returning; `source` outlives the call.
    let code = unsafe {
        ffi::espeak_Synth(
            source.as_ptr().cast(),
            size,
            0,
            ffi::POS_CHARACTER,
            0,
            ffi::CHARS_UTF8 as c_uint | flags,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
    };
    // SAFETY: waits for the (already finished) synchronous synthesis.
    let sync_code = unsafe { ffi::espeak_Synchronize() };
    let (samples, words) = SYNTH_OUTPUT.with(|output| std::mem::take(&mut *output.borrow_mut()));
    if code != ffi::EE_OK {
        return Err(EspeakError::Call {
            call: "espeak_Synth",
            code,
        });
    }
    if sync_code != ffi::EE_OK {
        return Err(EspeakError::Call {
            call: "espeak_Synchronize",
            code: sync_code,
        });
    }
    Ok((samples, words))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn languages_find_espeak_voices_exactly_or_by_primary_language() {
        assert_eq!(voice_of_language("de"), Some("de"));
        assert_eq!(voice_of_language("en-US"), Some("en-us"));
        assert_eq!(
            voice_of_language("en_GB"),
            Some("en"),
            "espeak's en-gb is the file en"
        );
        assert_eq!(voice_of_language("pt-BR"), Some("pt-br"));
        assert_eq!(
            voice_of_language("de-AT").map(|v| v.starts_with("de")),
            Some(true)
        );
        assert_eq!(voice_of_language("tlh"), None);
    }

    #[test]
    fn terminator_skips_look_ahead_spaces_and_closers() {
        assert_eq!(clause_terminator("Hello world, t"), Some(','));
        assert_eq!(clause_terminator("Hello world, "), Some(','));
        assert_eq!(clause_terminator("He said \"Stop!\" "), Some('!'));
        assert_eq!(clause_terminator("Yes?!  ("), Some('?'));
        assert_eq!(clause_terminator("“Quoted,”"), Some(','));
        assert_eq!(clause_terminator("wait... w"), Some('.'));
        assert_eq!(clause_terminator("one—two – t"), None);
        assert_eq!(clause_terminator("no punctuation at the end"), None);
        assert_eq!(clause_terminator(""), None);
    }

    #[test]
    fn ties_mark_one_phoneme_and_removed_give_the_untied_output() {
        let text = "I chew a nutshell; the nation's butter, along with it.";
        let tied = text_to_tied_phoneme_clauses(text, "en-us").unwrap();
        let plain = text_to_phoneme_clauses(text, "en-us").unwrap();
        let untie = |clauses: &[(String, Option<char>)]| -> Vec<(String, Option<char>)> {
            clauses
                .iter()
                .map(|(ipa, end)| (ipa.replace(TIE, ""), *end))
                .collect()
        };
        assert_eq!(untie(&tied), plain);
        let all: String = tied.iter().map(|(ipa, _)| ipa.as_str()).collect();
        assert!(
            all.contains("t\u{361}ʃˈuː"),
            "chew's affricate is tied: {all}"
        );
        assert!(all.contains("nˈʌtʃ"), "nutshell's t and ʃ are not: {all}");
        assert!(all.contains("a\u{361}ɪ"), "{all}");
    }

    #[test]
    fn rate_is_scaled_and_clamped() {
        assert_eq!(rate_for_speed(1.0), 175);
        assert_eq!(rate_for_speed(2.0), 350);
        assert_eq!(rate_for_speed(0.25), 80);
        assert_eq!(rate_for_speed(4.0), 450);
        assert_eq!(rate_for_speed(f32::NAN), 175);
    }

    #[test]
    fn char_boundary_steps_over_multibyte() {
        let text = "a—b".as_bytes(); // '—' is 3 bytes at 1..4
        assert_eq!(previous_char_boundary(text, 4), 1);
        assert_eq!(previous_char_boundary(text, 5), 4);
        assert_eq!(previous_char_boundary(text, 0), 0);
    }

    #[test]
    fn word_events_give_character_positions_and_rising_samples() {
        let text = "Naïve café owners, hello.";
        let (samples, words) = synthesize_with_words(text, "en-us", 175).unwrap();
        let chars: Vec<char> = text.chars().collect();
        let said: Vec<String> = words
            .iter()
            .filter(|w| w.chars > 0)
            .map(|w| chars[w.char_start..w.char_start + w.chars].iter().collect())
            .collect();
        assert_eq!(said, ["Naïve", "café", "owners", "hello"]);
        assert!(words.windows(2).all(|p| p[0].sample <= p[1].sample));
        assert!(words.iter().all(|w| w.sample <= samples.len()));
    }
}

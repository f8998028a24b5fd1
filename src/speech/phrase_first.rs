//! Where a stream's first utterance is cut ([`SynthesisItem::phrase_end`]): the words of
//! [`crate::text::phrase`] with what the utterance's reading knows on top, so that no cut falls
//! inside the words a rewrite made (`$5.50` as "five dollars fifty cents") or words said with
//! given phonemes.
//!
//! [`SynthesisItem::phrase_end`]: crate::engine::SynthesisItem::phrase_end

use std::ops::Range;

use crate::text::english::Spoken as SpokenText;

/// Where the first phrase of a streamed utterance ends ([`SynthesisItem::phrase_end`]): never
/// inside the words a rewrite made (a number, an abbreviation) or words said with given
/// phonemes.
pub(super) fn first_phrase_end(spoken: &SpokenText) -> Option<usize> {
    let protected: Vec<Range<usize>> = spoken
        .rewrites
        .iter()
        .map(|rewrite| rewrite.spoken.clone())
        .chain(spoken.pronunciations.iter().map(|p| p.text.clone()))
        .collect();
    crate::text::phrase::first_phrase_end(&spoken.text, &protected)
}

#[cfg(test)]
mod tests {
    use super::super::testing::{on_one_thread, request, service};
    use super::*;

    /// A stream's first phrase is cut inside its first utterance only, never inside words with
    /// given phonemes or a rewrite; an SSML break is a cut of its own.
    #[test]
    fn a_streams_first_phrase_keeps_breaks_given_phonemes_and_rewrites_whole() {
        on_one_thread(async {
            let service = service();
            let mut ssml = request(
                "<speak>Please hold on <break time=\"400ms\"/> while I look up your booking for \
                 tomorrow night.</speak>",
            );
            ssml.input_format = Some("ssml".into());
            let job = service.prepare_here(ssml).unwrap();
            let utterances = &job.script().utterances;
            assert_eq!(utterances.len(), 2);
            assert_eq!(
                utterances[1].pause_before,
                std::time::Duration::from_millis(400)
            );
            assert_eq!(first_phrase_end(&utterances[0].spoken), None);

            let job = service
                .prepare_here(request(
                    "Please give a warm welcome to [Kokoro and friends](/kˈOkəɹO ænd fɹˈɛndz/) \
                     on the stage tonight.",
                ))
                .unwrap();
            let spoken = &job.script().utterances[0].spoken;
            let given = spoken.pronunciations[0].text.clone();
            assert_eq!(&spoken.text[given.clone()], "Kokoro and friends");
            let cut = first_phrase_end(spoken).expect("a first phrase");
            assert_eq!(
                &spoken.text[cut..],
                "to Kokoro and friends on the stage tonight."
            );

            let job = service
                .prepare_here(request(
                    "You owe me $5.50 for the coffee and the sandwich today.",
                ))
                .unwrap();
            let spoken = &job.script().utterances[0].spoken;
            let cut = first_phrase_end(spoken).expect("a first phrase");
            assert!(!spoken.rewrites.is_empty());
            for rewrite in &spoken.rewrites {
                let inside = rewrite.spoken.start < cut && cut < rewrite.spoken.end;
                assert!(!inside, "{:?} cut at {cut}", spoken.text);
            }
        });
    }
}

//! IPA spelt in espeak-ng's own phoneme names, so that espeak voices say the phonemes a
//! pronunciation dictionary, inline markup or SSML `<phoneme>` gives.
//!
//! espeak-ng takes phonemes only in its own names (`[[h@l'oU]]`, not `/həlˈoʊ/`), and they
//! differ per language. It has no call that lists them, but it writes any text in either
//! alphabet, so each voice learns its table from a corpus phonemized both ways
//! ([`espeak::phoneme_names`]): every IPA symbol found there has the name this voice itself
//! used for it. An IPA symbol the corpus never brought out is one the voice is not known to
//! say, and is refused by name rather than guessed.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use parking_lot::Mutex;

use unicode_normalization::UnicodeNormalization;

use crate::espeak::{self, EspeakError};

/// Words that bring out every phoneme of English (General American and Received
/// Pronunciation: the lexical sets, weak vowels, syllabic consonants, flaps and glottal stops),
/// then a sentence or two each in the languages most often spoken with espeak-ng. A voice reads
/// all of it with its own rules, so a German voice learns German names from the German part
/// and, from the rest, whatever its rules make of foreign spelling: still its own phonemes.
const CORPUS: &str = "\
    Kit dress trap lot strut foot bath cloth nurse fleece face palm thought goat goose price \
    choice mouth near square start north force cure happy letter comma horses roses. \
    Pit bit tip dip cat gap fat vat thin this sip zip ship measure hat man nun sing let rat \
    yes wet church judge loch uh-oh. Button, bottle, better, little, rhythm, prism, hour, fire, \
    player, lawyer, mirror, hurry, about, ahead, village, sofa, quiet, tour, poor, bureau. \
    Zwölf Boxkämpfer jagen Viktor quer über den großen Sylter Deich; ich möchte Bücher, \
    Häuser und schöne Eichhörnchen; ach, Nacht, Buch, lachen, Pfeffer, Zahn, Tschüss. \
    Portez ce vieux whisky au juge blond qui fume; un bon vin blanc, l'enfant, peu, cœur, \
    huit, oui, agneau, brun, rouge, jour, chat, nuit, lune. \
    El veloz murciélago hindú comía feliz cardillo y kiwi; la cigüeña, el perro, pero, llave, \
    niño, caja, gente. \
    Quel vituperabile xenofobo zelante assaggia il whisky ed esclama alleluja; gli gnocchi, \
    la pizza, il cielo. \
    Luís argüia à Júlia que brações, fé, chá, óxido, pôr e zângão eram palavras; não, mãe, \
    pão, lhe, ninho. \
    Pa's wijze lynx bezag vroom het fikse aquaduct; goed, schip, huis, deur. \
    Pchnąć w tę łódź jeża lub ośm skrzyń fig; szczęście, rzeka, dzień. \
    Съешь же ещё этих мягких французских булок, да выпей чаю.";

/// espeak's separator between two names that would otherwise read as one (`a|I`, not `aI`).
const SEPARATOR: char = '|';

/// One voice's IPA symbols and espeak's names for them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct PhonemeNames {
    by_ipa: HashMap<String, String>,
    /// The longest IPA key, in characters: how far a longest match looks.
    longest: usize,
}

impl PhonemeNames {
    /// The names the espeak-ng voice `voice` uses, learnt once per process; `None` when espeak
    /// failed on the corpus or it brought out no phoneme, and the voice cannot be given any.
    pub(super) fn of(voice: &str) -> Option<Arc<Self>> {
        static LEARNT: Mutex<BTreeMap<String, Option<Arc<PhonemeNames>>>> =
            Mutex::new(BTreeMap::new());
        LEARNT
            .lock()
            .entry(voice.to_string())
            .or_insert_with(|| {
                Self::learn(voice)
                    .ok()
                    .filter(|names| !names.by_ipa.is_empty())
                    .map(Arc::new)
            })
            .clone()
    }

    /// The names `voice` uses, read off [`CORPUS`].
    fn learn(voice: &str) -> Result<Self, EspeakError> {
        Ok(Self::from_pairs(espeak::phoneme_names(CORPUS, voice)?))
    }

    fn from_pairs(pairs: Vec<(String, String)>) -> Self {
        let mut by_ipa = HashMap::new();
        for (ipa, name) in pairs {
            let ipa: String = ipa.nfd().filter(|c| !is_tie(*c)).collect();
            // Stress marks are not phonemes: `spell` writes them itself.
            if ipa.is_empty() || ipa.chars().all(is_stress) || name.contains(SEPARATOR) {
                continue;
            }
            // The first name seen wins: the corpus puts the voice's own language first.
            by_ipa.entry(ipa).or_insert(name);
        }
        let longest = by_ipa.keys().map(|k| k.chars().count()).max().unwrap_or(0);
        Self { by_ipa, longest }
    }

    /// `ipa` in this voice's names, ready to go inside `[[ ]]`: each phoneme by longest match,
    /// separated from the next, stress marks and word breaks kept, ties dropped, syllable
    /// dots only keeping the phonemes on either side apart. The error is the first symbol the voice has no name for.
    pub(super) fn spell(&self, ipa: &str) -> Result<String, char> {
        let ipa: Vec<char> = ipa.nfd().filter(|c| !is_tie(*c)).collect();
        let mut spelt = String::new();
        let mut at = 0;
        while at < ipa.len() {
            let c = ipa[at];
            let mark = match c {
                c if c.is_whitespace() => Some(' '),
                'ˈ' => Some('\''),
                'ˌ' => Some(','),
                // A syllable break or a link only keeps its neighbours apart: no name holds it.
                '.' | '‿' => {
                    at += 1;
                    continue;
                }
                _ => None,
            };
            if let Some(mark) = mark {
                if mark != ' ' || !(spelt.is_empty() || spelt.ends_with(' ')) {
                    spelt.push(mark);
                }
                at += 1;
                continue;
            }
            let found = (1..=self.longest.min(ipa.len() - at))
                .rev()
                .find_map(|len| {
                    let key: String = ipa[at..at + len].iter().collect();
                    self.by_ipa.get(&key).map(|name| (len, name))
                });
            let Some((len, name)) = found else {
                return Err(c);
            };
            if spelt.ends_with(|c: char| !c.is_whitespace() && !matches!(c, '\'' | ',')) {
                spelt.push(SEPARATOR);
            }
            spelt.push_str(name);
            at += len;
        }
        Ok(spelt.trim_end().to_string())
    }
}

fn is_tie(c: char) -> bool {
    matches!(c, '\u{361}' | '\u{35C}')
}

fn is_stress(c: char) -> bool {
    matches!(c, 'ˈ' | 'ˌ')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(pairs: &[(&str, &str)]) -> PhonemeNames {
        PhonemeNames::from_pairs(
            pairs
                .iter()
                .map(|(i, n)| (i.to_string(), n.to_string()))
                .collect(),
        )
    }

    #[test]
    fn spells_by_longest_match_with_separators_and_stress() {
        let table = names(&[
            ("h", "h"),
            ("ə", "@"),
            ("l", "l"),
            ("oʊ", "oU"),
            ("o", "o"),
            ("a", "a"),
            ("ɪ", "I"),
            ("aɪ", "aI"),
        ]);
        assert_eq!(table.spell("həlˈoʊ").unwrap(), "h|@|l'oU");
        // A diphthong is one name; its letters apart are two, kept apart by the separator.
        assert_eq!(table.spell("aɪ").unwrap(), "aI");
        assert_eq!(table.spell("a.ɪ").unwrap(), "a|I");
        assert_eq!(table.spell("ˈh  ə ").unwrap(), "'h @");
        assert_eq!(table.spell("a͡ɪ").unwrap(), "aI");
    }

    #[test]
    fn a_symbol_without_a_name_is_named() {
        let table = names(&[("h", "h"), ("ə", "@")]);
        assert_eq!(table.spell("həʁ"), Err('ʁ'));
    }
}

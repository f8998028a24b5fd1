//! Cutting Japanese into words: MeCab's lattice and Viterbi search over UniDic, reproduced
//! step for step (which candidates each position gets, unknown words included, and which of two
//! equal-cost paths wins), because misaki's readings are those of MeCab's best path and any
//! other segmentation reads some sentences differently.

use std::ops::Range;
use std::path::Path;

use super::dictionary::{CharClass, CharClasses, Connections, Lexicon, Token};
use super::JapaneseError;

/// MeCab's default limit on a run of one class taken as a single unknown word.
const MAX_GROUPING: usize = 24;

/// A word of the best path.
#[derive(Debug, Clone)]
pub(super) struct Morpheme<'a> {
    /// Byte range of the word in the text (spaces before it excluded).
    pub surface: Range<usize>,
    /// UniDic's features (comma-separated, quoted where a field holds a comma).
    pub feature: &'a str,
    /// The class of its first character (`char.bin`'s index: 3 symbol, 6 hiragana, 7 katakana …).
    pub char_class: u8,
    /// Whether the lexicon lacks it (an unknown-word entry made it).
    pub unknown: bool,
}

/// The analyser: UniDic's lexicons, costs and character classes.
pub(super) struct Tagger {
    system: Lexicon,
    unknown: Lexicon,
    connections: Connections,
    classes: CharClasses,
    /// The unknown-word tokens of each character class, by class index.
    unknown_tokens: Vec<Vec<Token>>,
    space: CharClass,
}

#[derive(Debug, Clone, Copy)]
enum Source {
    Begin,
    System(Token),
    Unknown(Token),
}

#[derive(Debug, Clone)]
struct Node {
    surface: Range<usize>,
    end: usize,
    source: Source,
    char_class: u8,
    cost: i64,
    previous: usize,
}

impl Node {
    fn ids(&self) -> (u16, u16) {
        match self.source {
            Source::Begin => (0, 0),
            Source::System(t) | Source::Unknown(t) => (t.left_id, t.right_id),
        }
    }
    fn word_cost(&self) -> i64 {
        match self.source {
            Source::Begin => 0,
            Source::System(t) | Source::Unknown(t) => t.cost as i64,
        }
    }
}

impl Tagger {
    pub fn open(dir: &Path) -> Result<Self, JapaneseError> {
        let system = Lexicon::open(&dir.join("sys.dic"))?;
        let unknown = Lexicon::open(&dir.join("unk.dic"))?;
        let connections = Connections::open(&dir.join("matrix.bin"))?;
        let classes = CharClasses::open(&dir.join("char.bin"))?;
        let unknown_tokens = classes
            .names()
            .iter()
            .map(|name| {
                unknown
                    .exact(name.as_bytes())
                    .map(|v| unknown.tokens(v).collect())
                    .unwrap_or_default()
            })
            .collect();
        let space = classes.of(' ');
        Ok(Self {
            system,
            unknown,
            connections,
            classes,
            unknown_tokens,
            space,
        })
    }

    /// Bytes mapped from the dictionary files.
    pub fn size(&self) -> usize {
        self.system.size() + self.unknown.size() + self.connections.size()
    }

    /// The words of MeCab's best path through `text`.
    pub fn tag<'a>(&'a self, text: &str) -> Vec<Morpheme<'a>> {
        let mut nodes = vec![Node {
            surface: 0..0,
            end: 0,
            source: Source::Begin,
            char_class: 0,
            cost: 0,
            previous: 0,
        }];
        // Nodes ending at each byte, in the order they were added.
        let mut ending: Vec<Vec<usize>> = vec![Vec::new(); text.len() + 1];
        ending[0].push(0);
        let mut found = Vec::new();
        for pos in 0..text.len() {
            if ending[pos].is_empty() || !text.is_char_boundary(pos) {
                continue;
            }
            for candidate in self.candidates(text, pos, &mut found) {
                let (left_id, _) = candidate.ids();
                let best = ending[pos]
                    .iter()
                    .rev()
                    .map(|&l| {
                        let left = &nodes[l];
                        let cost = left.cost
                            + self.connections.cost(left.ids().1, left_id)
                            + candidate.word_cost();
                        (cost, l)
                    })
                    .fold(None, |best: Option<(i64, usize)>, (cost, l)| match best {
                        Some((b, _)) if b <= cost => best,
                        _ => Some((cost, l)),
                    });
                let Some((cost, previous)) = best else {
                    continue;
                };
                let end = candidate.end;
                nodes.push(Node {
                    cost,
                    previous,
                    ..candidate
                });
                ending[end].push(nodes.len() - 1);
            }
        }
        // The end of sentence joins the last position any word reaches.
        let Some(last) = (0..=text.len()).rev().find(|&p| !ending[p].is_empty()) else {
            return Vec::new();
        };
        let mut best: Option<(i64, usize)> = None;
        for &l in ending[last].iter().rev() {
            let cost = nodes[l].cost + self.connections.cost(nodes[l].ids().1, 0);
            if best.is_none_or(|(b, _)| cost < b) {
                best = Some((cost, l));
            }
        }
        let mut words = Vec::new();
        let mut at = best.map_or(0, |(_, l)| l);
        while at != 0 {
            let node = &nodes[at];
            let (feature, unknown) = match node.source {
                Source::System(t) => (self.system.feature(&t), false),
                Source::Unknown(t) => (self.unknown.feature(&t), true),
                Source::Begin => ("", false),
            };
            words.push(Morpheme {
                surface: node.surface.clone(),
                feature,
                char_class: node.char_class,
                unknown,
            });
            at = node.previous;
        }
        words.reverse();
        words
    }

    /// The words that may start at `pos` (after any spaces), in the order MeCab links them.
    fn candidates(&self, text: &str, pos: usize, found: &mut Vec<(u32, usize)>) -> Vec<Node> {
        let mut start = pos;
        let mut class = self.classes.of(' ');
        for c in text[pos..].chars() {
            class = self.classes.of(c);
            if !class.is_kind_of(self.space) {
                break;
            }
            start += c.len_utf8();
        }
        if start >= text.len() {
            return Vec::new();
        }
        let mut added = Vec::new();
        self.system.prefixes(&text.as_bytes()[start..], found);
        for &(value, len) in found.iter() {
            for token in self.system.tokens(value) {
                added.push(Node {
                    surface: start..start + len,
                    end: start + len,
                    source: Source::System(token),
                    char_class: class.default_class(),
                    cost: 0,
                    previous: 0,
                });
            }
        }
        if added.is_empty() || class.always_unknown() {
            self.add_unknown(text, start, class, &mut added);
        }
        // MeCab links each new candidate in front of the previous ones.
        added.reverse();
        added
    }

    fn add_unknown(&self, text: &str, start: usize, class: CharClass, added: &mut Vec<Node>) {
        let push = |end: usize, added: &mut Vec<Node>| {
            let tokens = self.unknown_tokens.get(class.default_class() as usize);
            for &token in tokens.into_iter().flatten() {
                added.push(Node {
                    surface: start..end,
                    end,
                    source: Source::Unknown(token),
                    char_class: class.default_class(),
                    cost: 0,
                    previous: 0,
                });
            }
        };
        let first_len = text[start..].chars().next().map_or(1, char::len_utf8);
        let mut end = start + first_len;
        let mut group_end = None;
        if class.groups() {
            let mut run_class = class;
            let mut run_end = end;
            let mut run = 0;
            for c in text[end..].chars() {
                let next = self.classes.of(c);
                if !run_class.is_kind_of(next) {
                    break;
                }
                run_class = next;
                run_end += c.len_utf8();
                run += 1;
            }
            if run <= MAX_GROUPING {
                push(run_end, added);
            }
            group_end = Some(run_end);
        }
        for _ in 1..=class.max_length() {
            if end > text.len() {
                break;
            }
            if Some(end) == group_end {
                continue;
            }
            push(end, added);
            match text[end..].chars().next() {
                Some(c) if class.is_kind_of(self.classes.of(c)) => end += c.len_utf8(),
                _ => break,
            }
        }
        if added.is_empty() {
            push(end, added);
        }
    }
}

//! UniDic as MeCab compiles it, read in place: the system and unknown-word lexicons
//! (`sys.dic`, `unk.dic`: a double-array trie over the surfaces, then 16-byte token records,
//! then their feature strings), the connection costs (`matrix.bin`) and the character classes
//! (`char.bin`). misaki tags Japanese with MeCab over UniDic (through fugashi), so reading the
//! same compiled files, rather than a dictionary of another make, is what lets the readings
//! agree with it word for word.
//!
//! The files are mapped, not copied: 260 MB of dictionary cost only the pages a text touches.

use std::fs::File;
use std::ops::Range;
use std::path::Path;

use memmap2::Mmap;

use super::JapaneseError;

/// MeCab's check word: the first u32 of a lexicon is its byte size xor this.
const LEXICON_MAGIC: u32 = 0xef71_8f77;
const LEXICON_VERSION: u32 = 102;
/// Ten u32 fields and the 32-byte charset name.
const LEXICON_HEADER: usize = 10 * 4 + 32;
const TOKEN_SIZE: usize = 16;
/// Bytes of one character class name in `char.bin`.
const CLASS_NAME_SIZE: usize = 32;
/// `char.bin` has a class word for each UCS-2 code below 0xFFFF.
const CLASS_CODES: usize = 0xffff;

/// One entry of a lexicon: its connection ids, its cost and where its features are.
#[derive(Debug, Clone, Copy)]
pub(super) struct Token {
    pub left_id: u16,
    pub right_id: u16,
    pub cost: i16,
    pub feature: u32,
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
}

fn i32_at(bytes: &[u8], at: usize) -> i32 {
    i32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
}

fn u16_at(bytes: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(bytes[at..at + 2].try_into().expect("2 bytes"))
}

fn map(path: &Path) -> Result<Mmap, JapaneseError> {
    let file = File::open(path)
        .map_err(|e| JapaneseError::Dictionary(format!("{}: {e}", path.display())))?;
    // SAFETY: the dictionary files are installed once by scripts/japanese-dictionary.sh and never
    // written while the server runs; every read below is bounds-checked against the map's length.
    unsafe { Mmap::map(&file) }
        .map_err(|e| JapaneseError::Dictionary(format!("{}: {e}", path.display())))
}

fn malformed(path: &Path, why: &str) -> JapaneseError {
    JapaneseError::Dictionary(format!("{}: {why}", path.display()))
}

/// A compiled MeCab lexicon (`sys.dic` or `unk.dic`).
pub(super) struct Lexicon {
    bytes: Mmap,
    trie: Range<usize>,
    tokens: Range<usize>,
    features: Range<usize>,
}

impl Lexicon {
    pub fn open(path: &Path) -> Result<Self, JapaneseError> {
        let bytes = map(path)?;
        if bytes.len() < LEXICON_HEADER {
            return Err(malformed(path, "shorter than a MeCab dictionary header"));
        }
        if (u32_at(&bytes, 0) ^ LEXICON_MAGIC) as usize != bytes.len() {
            return Err(malformed(
                path,
                "not a MeCab dictionary (size check failed)",
            ));
        }
        if u32_at(&bytes, 4) != LEXICON_VERSION {
            return Err(malformed(path, "not a version 102 MeCab dictionary"));
        }
        let trie_size = u32_at(&bytes, 24) as usize;
        let tokens_size = u32_at(&bytes, 28) as usize;
        let features_size = u32_at(&bytes, 32) as usize;
        let trie = LEXICON_HEADER..LEXICON_HEADER + trie_size;
        let tokens = trie.end..trie.end + tokens_size;
        let features = tokens.end..tokens.end + features_size;
        if features.end > bytes.len()
            || !trie_size.is_multiple_of(8)
            || !tokens_size.is_multiple_of(TOKEN_SIZE)
        {
            return Err(malformed(path, "section sizes do not fit the file"));
        }
        Ok(Self {
            bytes,
            trie,
            tokens,
            features,
        })
    }

    pub fn size(&self) -> usize {
        self.bytes.len()
    }

    /// The double array's unit `index`: its base and check, or `None` past the array.
    fn unit(&self, index: usize) -> Option<(i32, u32)> {
        let at = self.trie.start + index.checked_mul(8)?;
        (at + 8 <= self.trie.end).then(|| (i32_at(&self.bytes, at), u32_at(&self.bytes, at + 4)))
    }

    /// The value stored at `node` when a key ends there.
    fn value_at(&self, node: i32) -> Option<u32> {
        let (base, check) = self.unit(usize::try_from(node).ok()?)?;
        (check == node as u32 && base < 0).then(|| (-base - 1) as u32)
    }

    /// Every key of the trie that is a prefix of `key`, shortest first, as (value, length).
    pub fn prefixes(&self, key: &[u8], found: &mut Vec<(u32, usize)>) {
        found.clear();
        let Some((mut node, _)) = self.unit(0) else {
            return;
        };
        for (i, &byte) in key.iter().enumerate() {
            if let Some(value) = self.value_at(node) {
                found.push((value, i));
            }
            let next = node as i64 + byte as i64 + 1;
            match usize::try_from(next).ok().and_then(|n| self.unit(n)) {
                Some((base, check)) if check == node as u32 => node = base,
                _ => return,
            }
        }
        if let Some(value) = self.value_at(node) {
            found.push((value, key.len()));
        }
    }

    /// The value of exactly `key`.
    pub fn exact(&self, key: &[u8]) -> Option<u32> {
        let mut found = Vec::new();
        self.prefixes(key, &mut found);
        found
            .last()
            .filter(|(_, len)| *len == key.len())
            .map(|(v, _)| *v)
    }

    /// The tokens a trie value names (index in its high 24 bits, count in its low 8).
    pub fn tokens(&self, value: u32) -> impl Iterator<Item = Token> + '_ {
        let first = (value >> 8) as usize;
        let count = (value & 0xff) as usize;
        (first..first + count).filter_map(move |i| {
            let at = self.tokens.start + i * TOKEN_SIZE;
            (at + TOKEN_SIZE <= self.tokens.end).then(|| Token {
                left_id: u16_at(&self.bytes, at),
                right_id: u16_at(&self.bytes, at + 2),
                cost: u16_at(&self.bytes, at + 6) as i16,
                feature: u32_at(&self.bytes, at + 8),
            })
        })
    }

    /// A token's feature string (comma-separated; empty when malformed).
    pub fn feature(&self, token: &Token) -> &str {
        let start = self.features.start + token.feature as usize;
        let tail = self.bytes.get(start..self.features.end).unwrap_or_default();
        let end = tail.iter().position(|&b| b == 0).unwrap_or(tail.len());
        std::str::from_utf8(&tail[..end]).unwrap_or_default()
    }
}

/// The cost of each pair of adjacent tokens (the left one's right id, the right one's left id).
pub(super) struct Connections {
    bytes: Mmap,
    left_size: usize,
    right_size: usize,
}

impl Connections {
    pub fn open(path: &Path) -> Result<Self, JapaneseError> {
        let bytes = map(path)?;
        if bytes.len() < 4 {
            return Err(malformed(path, "no matrix header"));
        }
        let left_size = u16_at(&bytes, 0) as usize;
        let right_size = u16_at(&bytes, 2) as usize;
        if bytes.len() != 4 + 2 * left_size * right_size {
            return Err(malformed(path, "matrix size does not match its header"));
        }
        Ok(Self {
            bytes,
            left_size,
            right_size,
        })
    }

    pub fn size(&self) -> usize {
        self.bytes.len()
    }

    pub fn cost(&self, left_token_right_id: u16, right_token_left_id: u16) -> i64 {
        let (l, r) = (left_token_right_id as usize, right_token_left_id as usize);
        if l >= self.left_size || r >= self.right_size {
            return i16::MAX as i64;
        }
        u16_at(&self.bytes, 4 + 2 * (l + self.left_size * r)) as i16 as i64
    }
}

/// What MeCab knows of a character: its classes (a bit set), the class whose unknown-word
/// entries it starts, how many characters of it an unknown word may span, whether a run of
/// it makes one unknown word, and whether unknown words are tried even where the lexicon has one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct CharClass(u32);

impl CharClass {
    pub fn is_kind_of(self, other: CharClass) -> bool {
        self.0 & other.0 & 0x3ffff != 0
    }
    pub fn default_class(self) -> u8 {
        ((self.0 >> 18) & 0xff) as u8
    }
    pub fn max_length(self) -> usize {
        ((self.0 >> 26) & 0xf) as usize
    }
    pub fn groups(self) -> bool {
        (self.0 >> 30) & 1 == 1
    }
    pub fn always_unknown(self) -> bool {
        (self.0 >> 31) & 1 == 1
    }
}

/// `char.bin`: the class names and each character's [`CharClass`].
pub(super) struct CharClasses {
    names: Vec<String>,
    classes: Vec<u32>,
}

impl CharClasses {
    pub fn open(path: &Path) -> Result<Self, JapaneseError> {
        let bytes = std::fs::read(path).map_err(|e| malformed(path, &e.to_string()))?;
        if bytes.len() < 4 {
            return Err(malformed(path, "no class count"));
        }
        let count = u32_at(&bytes, 0) as usize;
        let table = 4 + CLASS_NAME_SIZE * count;
        if bytes.len() != table + 4 * CLASS_CODES {
            return Err(malformed(path, "size does not match the class count"));
        }
        let names = (0..count)
            .map(|i| {
                let raw = &bytes[4 + i * CLASS_NAME_SIZE..4 + (i + 1) * CLASS_NAME_SIZE];
                let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
                String::from_utf8_lossy(&raw[..end]).into_owned()
            })
            .collect();
        let classes = (0..CLASS_CODES)
            .map(|c| u32_at(&bytes, table + 4 * c))
            .collect();
        Ok(Self { names, classes })
    }

    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// MeCab reads text as UCS-2: a character outside the Basic Multilingual Plane is code 0.
    pub fn of(&self, c: char) -> CharClass {
        let code = c as usize;
        let code = if code >= CLASS_CODES { 0 } else { code };
        CharClass(self.classes[code])
    }
}

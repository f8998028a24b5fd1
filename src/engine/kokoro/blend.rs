//! Voices mixed from packs, in Kokoro-FastAPI's syntax, which clients of Kokoro servers
//! already send: `af_bella(2)+af_sky(1)`, `af_bella+af_sky-am_adam`.
//!
//! The grammar, as Kokoro-FastAPI parses it: whitespace is ignored; the text is cut at every
//! `+` and `-`, each a sign for the term after it, so no term may be empty (no sign first or
//! last, none doubled); a term is a voice name or `name(weight)`, parentheses never nested,
//! the weight a positive finite number (1 when left out). Every name may be an OpenAI name
//! (`nova`), resolved per term. The weights are divided by their total, subtracted terms'
//! weights counted in it too, so `a+b-c` is (a + b − c) / 3 and `a(2)+b(1)` is ⅔ a + ⅓ b.
//! A pack is linear in its rows, so mixing whole packs mixes the chosen style vectors alike.
//!
//! A [`Blend`] is kept in a canonical form (one coefficient per voice, voices in order), whose
//! [`cache_name`](Blend::cache_name) is the same for every way of writing the same mix, so
//! equal blends share a cache entry and a loaded pack.
//!
//! Errors are this module's own and say what is wrong with the text, quoting at most a short
//! piece of it: the text comes from a client.

use std::collections::BTreeMap;

use super::packs::Pack;

/// Most terms one blend may have: far more than any mix worth hearing, few enough that a
/// hostile request cannot make the server load and add up packs without end.
pub const MAX_TERMS: usize = 64;

/// A voice whose coefficients cancel to less than this is no part of the mix (what is left of
/// `a+b-b` is `a`, not `a` plus rounding noise of `b`).
const NEGLIGIBLE: f64 = 1e-6;

/// Characters of the client's text quoted in an error.
const QUOTED: usize = 40;

/// One voice of a blend and its share, negative when subtracted.
#[derive(Debug, Clone, PartialEq)]
pub struct Term {
    pub voice: String,
    pub coefficient: f32,
}

/// A mix of packs, canonical: one term per voice, in voice order, coefficients normalised.
#[derive(Debug, Clone, PartialEq)]
pub struct Blend {
    terms: Vec<Term>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BlendError {
    #[error("no voice given")]
    Empty,
    #[error("'{0}' has an empty term: a '+' or '-' needs a voice on both sides")]
    EmptyTerm(String),
    #[error("'{0}' is not a voice or voice(weight)")]
    BadTerm(String),
    #[error("'{0}' needs a positive finite weight")]
    BadWeight(String),
    #[error("unknown voice '{0}'")]
    UnknownVoice(String),
    #[error("a blend has at most {max} terms, not {found}")]
    TooManyTerms { max: usize, found: usize },
    #[error("the weights are too large to add up")]
    Overflow,
    #[error("'{0}' cancels out: no voice is left")]
    CancelsOut(String),
}

/// At most [`QUOTED`] characters of `text`, marked when cut.
fn quoted(text: &str) -> String {
    match text.char_indices().nth(QUOTED) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

impl Blend {
    /// Parses `spec`; `resolve` turns each term's name into a pack id (OpenAI names included)
    /// or `None` for a name that is no voice.
    pub fn parse(
        spec: &str,
        mut resolve: impl FnMut(&str) -> Option<String>,
    ) -> Result<Self, BlendError> {
        let text: String = spec.chars().filter(|c| !c.is_whitespace()).collect();
        if text.is_empty() {
            return Err(BlendError::Empty);
        }
        // Both checks before anything is allocated per term.
        let is_sign = |c: char| c == '+' || c == '-';
        let bytes = text.as_bytes();
        let doubled = bytes
            .windows(2)
            .any(|w| is_sign(w[0] as char) && is_sign(w[1] as char));
        if text.starts_with(is_sign) || text.ends_with(is_sign) || doubled {
            return Err(BlendError::EmptyTerm(quoted(&text)));
        }
        let found = 1 + text.chars().filter(|&c| is_sign(c)).count();
        if found > MAX_TERMS {
            return Err(BlendError::TooManyTerms {
                max: MAX_TERMS,
                found,
            });
        }
        let mut raw_terms = Vec::with_capacity(found);
        let mut sign = 1.0;
        let mut start = 0;
        for (at, c) in text.char_indices() {
            if is_sign(c) {
                raw_terms.push((sign, &text[start..at]));
                sign = if c == '+' { 1.0 } else { -1.0 };
                start = at + 1;
            }
        }
        raw_terms.push((sign, &text[start..]));

        let mut weighted = Vec::with_capacity(raw_terms.len());
        for (sign, term) in raw_terms {
            let (name, weight) = parse_term(term)?;
            let voice = resolve(name).ok_or_else(|| BlendError::UnknownVoice(quoted(name)))?;
            weighted.push((voice, sign * weight));
        }
        let total: f64 = weighted.iter().map(|(_, w)| w.abs()).sum();
        if !total.is_finite() {
            return Err(BlendError::Overflow);
        }
        let mut coefficients: BTreeMap<String, f64> = BTreeMap::new();
        for (voice, weight) in weighted {
            *coefficients.entry(voice).or_default() += weight / total;
        }
        let terms: Vec<Term> = coefficients
            .into_iter()
            .filter(|(_, c)| c.abs() >= NEGLIGIBLE)
            .map(|(voice, c)| Term {
                voice,
                coefficient: c as f32,
            })
            .collect();
        if terms.is_empty() {
            return Err(BlendError::CancelsOut(quoted(&text)));
        }
        Ok(Self { terms })
    }

    pub fn terms(&self) -> &[Term] {
        &self.terms
    }

    /// The one pack this blend is, when it is a single voice at full weight.
    pub fn single(&self) -> Option<&str> {
        match self.terms.as_slice() {
            [Term { voice, coefficient }] if *coefficient == 1.0 => Some(voice),
            _ => None,
        }
    }

    /// A name for the mix that every equal blend shares: the voice id itself for a single
    /// voice, else `a(0.6666667)+b(0.33333334)` — each voice once, in order, its coefficient
    /// as the shortest text that reads back as the same f32. A cache key, not meant to be
    /// parsed again (that would normalise the rounded coefficients anew).
    pub fn cache_name(&self) -> String {
        if let Some(voice) = self.single() {
            return voice.to_string();
        }
        let mut name = String::new();
        for (i, term) in self.terms.iter().enumerate() {
            if term.coefficient < 0.0 {
                name.push('-');
            } else if i > 0 {
                name.push('+');
            }
            name.push_str(&format!("{}({})", term.voice, term.coefficient.abs()));
        }
        name
    }

    /// The blended pack: Σ coefficient × pack, element by element (summed in f64, in voice
    /// order, so equal blends give bit-equal packs). `pack` loads one voice's pack.
    pub fn mix<E>(&self, mut pack: impl FnMut(&str) -> Result<Pack, E>) -> Result<Pack, E> {
        if let Some(voice) = self.single() {
            return pack(voice);
        }
        let mut sum: Vec<f64> = Vec::new();
        for term in &self.terms {
            let values = pack(&term.voice)?;
            let values = values.values();
            sum.resize(values.len(), 0.0);
            let c = f64::from(term.coefficient);
            for (s, &v) in sum.iter_mut().zip(values) {
                *s += c * f64::from(v);
            }
        }
        Ok(Pack::from_mix(sum.into_iter().map(|v| v as f32).collect()))
    }
}

/// `name` or `name(weight)`: the name and the weight (1 when none is written).
fn parse_term(term: &str) -> Result<(&str, f64), BlendError> {
    let bad = || BlendError::BadTerm(quoted(term));
    let Some(open) = term.find('(') else {
        return if term.contains(')') {
            Err(bad())
        } else {
            Ok((term, 1.0))
        };
    };
    let name = &term[..open];
    let weight = term[open + 1..].strip_suffix(')').ok_or_else(bad)?;
    if name.is_empty() || name.contains(')') || weight.contains(['(', ')']) {
        return Err(bad());
    }
    match weight.parse::<f64>() {
        Ok(w) if w.is_finite() && w > 0.0 => Ok((name, w)),
        _ => Err(BlendError::BadWeight(quoted(term))),
    }
}

#[cfg(test)]
mod tests {
    use super::super::names::openai_voice;
    use super::super::packs::{ROWS, STYLE_DIM};
    use super::*;

    const KNOWN: [&str; 6] = [
        "af_bella", "af_sky", "am_adam", "af_alloy", "af_nova", "bf_emma",
    ];

    fn resolve(name: &str) -> Option<String> {
        let id = openai_voice(name).unwrap_or(name);
        KNOWN.contains(&id).then(|| id.to_string())
    }

    fn parse(spec: &str) -> Result<Blend, BlendError> {
        Blend::parse(spec, resolve)
    }

    fn terms(spec: &str) -> Vec<(String, f32)> {
        parse(spec)
            .unwrap_or_else(|e| panic!("{spec:?}: {e}"))
            .terms()
            .iter()
            .map(|t| (t.voice.clone(), t.coefficient))
            .collect()
    }

    fn t(voice: &str, c: f32) -> (String, f32) {
        (voice.to_string(), c)
    }

    #[test]
    fn weights_are_normalised_by_their_total() {
        let table: &[(&str, Vec<(String, f32)>)] = &[
            ("af_bella", vec![t("af_bella", 1.0)]),
            ("af_bella(2)", vec![t("af_bella", 1.0)]),
            (
                "af_bella(2)+af_sky(1)",
                vec![t("af_bella", 2.0 / 3.0), t("af_sky", 1.0 / 3.0)],
            ),
            (
                "af_bella+af_sky-am_adam",
                vec![
                    t("af_bella", 1.0 / 3.0),
                    t("af_sky", 1.0 / 3.0),
                    t("am_adam", -1.0 / 3.0),
                ],
            ),
            (
                "af_sky(0.5)+af_bella(1.5)",
                vec![t("af_bella", 0.75), t("af_sky", 0.25)],
            ),
            // Repeats merge; what cancels goes, and its weight still counted in the total.
            ("af_bella+af_bella", vec![t("af_bella", 1.0)]),
            ("af_bella+af_sky-af_sky", vec![t("af_bella", 1.0 / 3.0)]),
            (
                " af_bella ( 2 ) +\taf_sky ",
                vec![t("af_bella", 2.0 / 3.0), t("af_sky", 1.0 / 3.0)],
            ),
            // OpenAI names resolve per term.
            ("nova+alloy", vec![t("af_alloy", 0.5), t("af_nova", 0.5)]),
            (
                "af_bella(.5)+af_sky(5.)+am_adam(1e1)",
                vec![
                    t("af_bella", 0.5 / 15.5),
                    t("af_sky", 5.0 / 15.5),
                    t("am_adam", 10.0 / 15.5),
                ],
            ),
            // A weight far below the others' leaves nothing audible.
            ("af_bella(0.0000000001)+af_sky", vec![t("af_sky", 1.0)]),
            ("af_bella(0.0000000001)", vec![t("af_bella", 1.0)]),
        ];
        for (spec, expected) in table {
            let got = terms(spec);
            assert_eq!(got.len(), expected.len(), "{spec}: {got:?}");
            for ((voice, c), (want_voice, want_c)) in got.iter().zip(expected) {
                assert_eq!(voice, want_voice, "{spec}");
                assert!((c - want_c).abs() < 1e-6, "{spec}: {voice} {c} ≠ {want_c}");
            }
        }
    }

    #[test]
    fn bad_input_is_refused_with_the_reason() {
        use BlendError::*;
        let table: &[(&str, BlendError)] = &[
            ("", Empty),
            (" \t\n", Empty),
            ("+", EmptyTerm("+".into())),
            ("+af_bella", EmptyTerm("+af_bella".into())),
            ("af_bella-", EmptyTerm("af_bella-".into())),
            ("af_bella++af_sky", EmptyTerm("af_bella++af_sky".into())),
            ("af_bella+-af_sky", EmptyTerm("af_bella+-af_sky".into())),
            ("af_bella(2", BadTerm("af_bella(2".into())),
            ("af_bella2)", BadTerm("af_bella2)".into())),
            ("(2)", BadTerm("(2)".into())),
            ("af_bella(1)(2)", BadTerm("af_bella(1)(2)".into())),
            ("af_bella((2))", BadTerm("af_bella((2))".into())),
            ("af_bella(2)x", BadTerm("af_bella(2)x".into())),
            // The sign splits first, as in Kokoro-FastAPI: no signed weights or exponents.
            ("af_bella(-1)", BadTerm("af_bella(".into())),
            ("af_bella(1e-3)", BadTerm("af_bella(1e".into())),
            ("af_bella()", BadWeight("af_bella()".into())),
            ("af_bella(0)", BadWeight("af_bella(0)".into())),
            ("af_bella(0.0)+af_sky", BadWeight("af_bella(0.0)".into())),
            ("af_bella(nan)", BadWeight("af_bella(nan)".into())),
            ("af_bella(NaN)", BadWeight("af_bella(NaN)".into())),
            ("af_bella(inf)", BadWeight("af_bella(inf)".into())),
            ("af_bella(infinity)", BadWeight("af_bella(infinity)".into())),
            ("af_bella(1e400)", BadWeight("af_bella(1e400)".into())),
            ("af_bella(two)", BadWeight("af_bella(two)".into())),
            ("af_bella(1_0)", BadWeight("af_bella(1_0)".into())),
            ("af_bella(1e308)+af_sky(1e308)", Overflow),
            ("af_bella-af_bella", CancelsOut("af_bella-af_bella".into())),
            ("af_nobody", UnknownVoice("af_nobody".into())),
            ("af_bella+af_nobody(2)", UnknownVoice("af_nobody".into())),
            ("Nova", UnknownVoice("Nova".into())),
            ("af_bélla", UnknownVoice("af_bélla".into())),
            ("af_bella＋af_sky", UnknownVoice("af_bella＋af_sky".into())),
            ("af_bella\u{200b}", UnknownVoice("af_bella\u{200b}".into())),
            ("af_bella(２)", BadWeight("af_bella(２)".into())),
            ("🙂(1)", UnknownVoice("🙂".into())),
        ];
        for (spec, expected) in table {
            assert_eq!(parse(spec).as_ref(), Err(expected), "{spec:?}");
        }
    }

    #[test]
    fn hostile_sizes_are_bounded() {
        // 1000 terms: refused before any voice is looked up.
        let many = vec!["af_bella"; 1000].join("+");
        let mut lookups = 0;
        let refused = Blend::parse(&many, |n| {
            lookups += 1;
            resolve(n)
        });
        assert_eq!(
            refused,
            Err(BlendError::TooManyTerms {
                max: MAX_TERMS,
                found: 1000
            })
        );
        assert_eq!(lookups, 0);
        let most = vec!["af_bella"; MAX_TERMS].join("+");
        assert_eq!(parse(&most).unwrap().single(), Some("af_bella"));
        // A megabyte of name: refused, and the message quotes only its start.
        let long = "a".repeat(1 << 20);
        let error = parse(&long).unwrap_err();
        assert!(matches!(error, BlendError::UnknownVoice(_)));
        assert!(error.to_string().chars().count() < 80, "{error}");
        // Long multi-byte text is cut at a character boundary.
        let wide = "é".repeat(5000) + "(";
        let error = parse(&wide).unwrap_err().to_string();
        assert!(
            error.contains('…') && error.chars().count() < 100,
            "{error}"
        );
        // A megabyte of separators.
        assert!(matches!(
            parse(&"+".repeat(1 << 20)),
            Err(BlendError::EmptyTerm(_))
        ));
        // Errors never speak of HTTP.
        for spec in ["", "+", "x(", "af_bella(0)", "nobody", &many] {
            let message = parse(spec).unwrap_err().to_string();
            assert!(!message.to_lowercase().contains("http"), "{message}");
        }
    }

    #[test]
    fn equal_blends_share_a_cache_name() {
        let same = [
            "af_bella(2)+af_sky(1)",
            "af_sky(1)+af_bella(2)",
            "af_bella(4)+af_sky(2)",
            "af_sky+af_bella+af_bella",
            " af_bella ( 2 ) + af_sky ",
        ];
        let names: Vec<String> = same
            .iter()
            .map(|s| parse(s).unwrap().cache_name())
            .collect();
        assert!(names.windows(2).all(|w| w[0] == w[1]), "{names:?}");
        assert_eq!(names[0], "af_bella(0.6666667)+af_sky(0.33333334)");
        // Adam's weight counts in the total even where he cancels out: a quieter mix.
        assert_ne!(
            parse("af_bella(2)+af_sky(1)").unwrap(),
            parse("af_bella(2)+af_sky(1)+am_adam-am_adam").unwrap()
        );
        assert_eq!(parse("af_bella(3)").unwrap().cache_name(), "af_bella");
        assert_eq!(parse("shimmer").unwrap().cache_name(), "af_bella");
        assert_eq!(
            parse("af_bella+af_sky-am_adam").unwrap().cache_name(),
            "af_bella(0.33333334)+af_sky(0.33333334)-am_adam(0.33333334)"
        );
        assert_ne!(
            parse("af_bella(2)+af_sky").unwrap().cache_name(),
            parse("af_bella+af_sky(2)").unwrap().cache_name()
        );
    }

    fn constant(value: f32) -> Pack {
        Pack::from_values(vec![value; ROWS * STYLE_DIM]).unwrap()
    }

    fn packs(voice: &str) -> Result<Pack, String> {
        match voice {
            "af_bella" => Ok(constant(1.0)),
            "af_sky" => Ok(constant(3.0)),
            "am_adam" => Ok(constant(6.0)),
            other => Err(format!("no pack {other}")),
        }
    }

    #[test]
    fn mixing_adds_the_packs_by_their_shares() {
        let mix = |spec: &str| parse(spec).unwrap().mix(packs).unwrap();
        let close = |pack: &Pack, want: f32| {
            assert!(
                pack.values().iter().all(|v| (v - want).abs() < 1e-6),
                "{pack:?} ≠ {want}"
            );
        };
        close(&mix("af_bella"), 1.0);
        close(&mix("af_bella(2)+af_sky(1)"), 2.0 / 3.0 + 1.0);
        close(&mix("af_bella+af_sky-am_adam"), (1.0 + 3.0 - 6.0) / 3.0);
        close(&mix("af_bella+af_sky-af_sky"), 1.0 / 3.0);
        // Row by row: the mix of the packs' rows is the row of the mixed pack.
        let numbered = |scale: f32| {
            Pack::from_values(
                (0..ROWS * STYLE_DIM)
                    .map(|i| scale * (i / STYLE_DIM) as f32)
                    .collect(),
            )
            .unwrap()
        };
        let blend = parse("af_bella(3)+af_sky").unwrap();
        let mixed = blend
            .mix(|v| Ok::<_, String>(numbered(if v == "af_bella" { 1.0 } else { 5.0 })))
            .unwrap();
        // 40 tokens: row 39.
        assert_eq!(mixed.style(40)[0], 0.75 * 39.0 + 0.25 * 195.0);
        // A pack that fails to load fails the mix.
        let failed = parse("af_bella+bf_emma").unwrap().mix(packs);
        assert_eq!(failed, Err("no pack bf_emma".to_string()));
    }
}

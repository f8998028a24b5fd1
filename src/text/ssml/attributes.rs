//! The attributes of each element: which ones it takes, and what their values (break times,
//! speed factors, languages, readings) are worth.

use std::ops::RangeInclusive;
use std::time::Duration;

use quick_xml::events::BytesStart;
use quick_xml::XmlVersion;

use super::errors::offset_within;
use super::is_language_tag;
use super::pieces::{collapse_whitespace, InterpretAs, KNOWN_ENTITIES};
use super::reader::{Parser, Reading};
use super::SsmlError;

/// The longest pause a `<break time>` may ask for: a longer one is far more likely a slip
/// (`5000s` for `5000ms`) than a wish, and would hold a synthesis slot producing silence.
const MAX_BREAK: Duration = Duration::from_secs(10);

/// The speed factors a voice can be driven at without falling apart.
const RATE_RANGE: RangeInclusive<f32> = 0.25..=4.0;

/// The `<prosody>` attributes SSML defines that the voices here cannot honour: named so that
/// their error says "not supported" rather than "unknown".
const UNSUPPORTED_PROSODY: &[&str] = &["pitch", "volume", "contour", "range", "duration"];

/// One attribute of a start tag, its value decoded.
pub(super) struct Attribute {
    name: String,
    value: String,
    /// Where its name is written: errors about it point there.
    at: usize,
}

pub(super) fn find<'l>(attributes: &'l [Attribute], name: &str) -> Option<&'l Attribute> {
    attributes.iter().find(|attribute| attribute.name == name)
}

impl Parser<'_> {
    pub(super) fn attributes(
        &self,
        tag: &BytesStart<'_>,
        tag_start: usize,
    ) -> Result<Vec<Attribute>, SsmlError> {
        let mut attributes = Vec::new();
        for attribute in tag.attributes() {
            let attribute = attribute.map_err(|error| self.attribute_error(&error, tag_start))?;
            let key = attribute.key.as_ref();
            let at = offset_within(self.input, key).unwrap_or(tag_start);
            let name = key.to_owned();
            let value = attribute
                .normalized_value(XmlVersion::Implicit1_0)
                .map_err(|_| {
                    self.error(
                        at,
                        format!(
                            "the value of `{name}` has a bare `&` or an unknown entity: write `&` as `&amp;`; the entities understood are {KNOWN_ENTITIES}"
                        ),
                    )
                })?
                .into_owned();
            attributes.push(Attribute { name, value, at });
        }
        Ok(attributes)
    }

    /// Refuses any attribute of `element` not in `allowed`.
    pub(super) fn allow_only(
        &self,
        attributes: &[Attribute],
        element: &str,
        allowed: &[&str],
    ) -> Result<(), SsmlError> {
        let Some(stray) = attributes
            .iter()
            .find(|attribute| !allowed.contains(&attribute.name.as_str()))
        else {
            return Ok(());
        };
        let name = &stray.name;
        let message = if element == "prosody" && UNSUPPORTED_PROSODY.contains(&name.as_str()) {
            format!("`<prosody {name}>` is not supported: only `rate` is")
        } else {
            format!(
                "`<{element}>` has no attribute `{name}`: it takes {}",
                list_of(allowed)
            )
        };
        Err(self.error(stray.at, message))
    }

    /// The `xml:lang` of an element, or the language it inherits when it has none.
    pub(super) fn language(
        &self,
        attributes: &[Attribute],
        inherited: Option<String>,
    ) -> Result<Option<String>, SsmlError> {
        let Some(attribute) = find(attributes, "xml:lang") else {
            return Ok(inherited);
        };
        let tag = attribute.value.trim();
        if !is_language_tag(tag) {
            return Err(self.error(
                attribute.at,
                format!(
                    "`xml:lang=\"{}\"` is not a language tag such as `en-US` or `de`",
                    attribute.value
                ),
            ));
        }
        Ok(Some(tag.to_owned()))
    }

    pub(super) fn break_length(&self, attributes: &[Attribute]) -> Result<Duration, SsmlError> {
        self.allow_only(attributes, "break", &["time", "strength"])?;
        // SSML: when both are given, `time` wins.
        if let Some(time) = find(attributes, "time") {
            return break_time(&time.value).map_err(|message| self.error(time.at, message));
        }
        let Some(strength) = find(attributes, "strength") else {
            return Ok(Duration::from_millis(400));
        };
        let millis = match strength.value.trim() {
            "none" => 0,
            "x-weak" => 100,
            "weak" => 200,
            "medium" => 400,
            "strong" => 700,
            "x-strong" => 1000,
            other => {
                return Err(self.error(
                    strength.at,
                    format!(
                        "break strength `{other}` is not one of `none`, `x-weak`, `weak`, `medium`, `strong` and `x-strong`"
                    ),
                ));
            }
        };
        Ok(Duration::from_millis(millis))
    }

    /// The speed factor inside a `<prosody>`: its own rate times the rate it is nested in.
    pub(super) fn prosody_rate(
        &self,
        attributes: &[Attribute],
        parent_rate: f32,
        start: usize,
    ) -> Result<f32, SsmlError> {
        self.allow_only(attributes, "prosody", &["rate"])?;
        let Some(rate) = find(attributes, "rate") else {
            return Err(self.error(
                start,
                "`<prosody>` needs a `rate` attribute, e.g. `rate=\"slow\"` (pitch and volume are not supported)",
            ));
        };
        let factor = speed_factor(&rate.value).map_err(|message| self.error(rate.at, message))?;
        let combined = parent_rate * factor;
        if !RATE_RANGE.contains(&combined) {
            return Err(self.error(
                rate.at,
                format!(
                    "nested `<prosody>` rates multiply to {combined}, outside the range of {} to {} times normal speed",
                    RATE_RANGE.start(),
                    RATE_RANGE.end()
                ),
            ));
        }
        Ok(combined)
    }

    pub(super) fn say_as(
        &self,
        attributes: &[Attribute],
        start: usize,
    ) -> Result<Reading, SsmlError> {
        self.allow_only(attributes, "say-as", &["interpret-as", "format"])?;
        let Some(interpret_as) = find(attributes, "interpret-as") else {
            return Err(self.error(
                start,
                "`<say-as>` needs an `interpret-as` attribute, e.g. `interpret-as=\"date\"`",
            ));
        };
        let name = interpret_as.value.trim();
        let spelled_out = (name == "spell-out").then_some(InterpretAs::Characters);
        let Some(how) = InterpretAs::parse(name).or(spelled_out) else {
            return Err(self.error(
                interpret_as.at,
                format!(
                    "`interpret-as=\"{name}\"` is not supported: use `characters`, `spell-out`, `cardinal`, `ordinal`, `digits`, `date`, `time` or `telephone`"
                ),
            ));
        };
        let format = find(attributes, "format")
            .map(|format| format.value.trim().to_owned())
            .filter(|format| !format.is_empty());
        Ok(Reading::SayAs {
            interpret_as: how,
            format,
        })
    }

    pub(super) fn phoneme(
        &self,
        attributes: &[Attribute],
        start: usize,
    ) -> Result<Reading, SsmlError> {
        self.allow_only(attributes, "phoneme", &["alphabet", "ph"])?;
        if let Some(alphabet) = find(attributes, "alphabet") {
            if alphabet.value.trim() != "ipa" {
                return Err(self.error(
                    alphabet.at,
                    format!(
                        "phoneme alphabet `{}` is not supported: only `ipa` is",
                        alphabet.value
                    ),
                ));
            }
        }
        let ipa = find(attributes, "ph")
            .map(|ph| ph.value.trim())
            .unwrap_or_default();
        if ipa.is_empty() {
            return Err(self.error(
                start,
                "`<phoneme>` needs a `ph` attribute with the IPA to say, e.g. `ph=\"kˈOkəɹO\"`",
            ));
        }
        Ok(Reading::Phoneme(ipa.to_owned()))
    }

    pub(super) fn sub(&self, attributes: &[Attribute], start: usize) -> Result<Reading, SsmlError> {
        self.allow_only(attributes, "sub", &["alias"])?;
        let Some(alias) = find(attributes, "alias") else {
            return Err(self.error(
                start,
                "`<sub>` needs an `alias` attribute with the text to say instead, e.g. `alias=\"World Wide Web\"`",
            ));
        };
        Ok(Reading::Sub(collapse_whitespace(
            [alias.value.as_str()].into_iter(),
        )))
    }
}

/// A `<break time>`: a number of seconds (`1.5s`) or milliseconds (`500ms`), up to [`MAX_BREAK`].
fn break_time(value: &str) -> Result<Duration, String> {
    let written = value.trim();
    let not_a_time =
        || format!("break time `{value}` is not a duration: write it like `500ms` or `1.5s`");
    let (number, seconds_per_unit) = if let Some(number) = written.strip_suffix("ms") {
        (number, 0.001)
    } else if let Some(number) = written.strip_suffix('s') {
        (number, 1.0)
    } else {
        return Err(not_a_time());
    };
    let seconds = unsigned_decimal(number.trim()).ok_or_else(not_a_time)? * seconds_per_unit;
    if seconds > MAX_BREAK.as_secs_f64() {
        return Err(format!(
            "break time `{value}` is longer than the limit of {}s",
            MAX_BREAK.as_secs()
        ));
    }
    Duration::try_from_secs_f64(seconds).map_err(|_| not_a_time())
}

/// A `<prosody rate>` as a speed factor: a keyword, a percentage of normal speed, or the factor.
fn speed_factor(value: &str) -> Result<f32, String> {
    let written = value.trim();
    let factor = match written {
        "x-slow" => 0.5,
        "slow" => 0.75,
        "medium" | "default" => 1.0,
        "fast" => 1.25,
        "x-fast" => 1.5,
        _ => {
            let number = match written.strip_suffix('%') {
                Some(percent) => unsigned_decimal(percent.trim()).map(|percent| percent / 100.0),
                None => unsigned_decimal(written),
            };
            let Some(number) = number else {
                return Err(format!(
                    "rate `{value}` is not understood: use `x-slow`, `slow`, `medium`, `fast`, `x-fast`, a percentage of normal speed such as `80%`, or a factor such as `1.2`"
                ));
            };
            number as f32
        }
    };
    if !RATE_RANGE.contains(&factor) {
        return Err(format!(
            "rate `{value}` is out of range: the speed must be {} to {} times normal ({}% to {}%)",
            RATE_RANGE.start(),
            RATE_RANGE.end(),
            RATE_RANGE.start() * 100.0,
            RATE_RANGE.end() * 100.0
        ));
    }
    Ok(factor)
}

/// A plain decimal number such as `500` or `1.5`: no sign, exponent, or `inf`, which
/// `str::parse` would also take.
fn unsigned_decimal(text: &str) -> Option<f64> {
    let mut digits = 0;
    let mut points = 0;
    for c in text.chars() {
        match c {
            '0'..='9' => digits += 1,
            '.' => points += 1,
            _ => return None,
        }
    }
    if digits == 0 || points > 1 {
        return None;
    }
    text.parse().ok()
}

fn list_of(names: &[&str]) -> String {
    let quoted: Vec<String> = names.iter().map(|name| format!("`{name}`")).collect();
    match quoted.split_last() {
        None => "no attributes".to_owned(),
        Some((only, [])) => format!("only {only}"),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
    }
}

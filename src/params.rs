//! The knobs of one synthesis, declared once.
//!
//! A request's speed, seed, noise scales and speaker travel unchanged from the validated request
//! into the cache key, the engine's batch item and the model's input. Keeping them in one struct
//! means a new knob is one new field here, not five parallel edits, and its valid range is
//! written once, in [`SPEED`] / [`NOISE`], and checked once, by [`SynthesisParams::validate`].

use std::ops::RangeInclusive;

use serde::Serialize;

/// Valid speaking rates; 1.0 is the voice's natural rate and the audio's length scales by 1/speed.
pub const SPEED: RangeInclusive<f32> = 0.25..=4.0;

/// Valid VITS sampling-noise overrides (`noise_scale`, `noise_w`).
pub const NOISE: RangeInclusive<f32> = 0.0..=2.0;

/// How an utterance should sound, apart from its text and voice.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SynthesisParams {
    /// Speaking rate within [`SPEED`].
    pub speed: f32,
    /// Seed for every random draw. A request without one gets a random seed per synthesis; an
    /// engine item always carries its own (see [`SynthesisParams::for_item`]).
    pub seed: Option<u64>,
    /// Speaker id of a multi-speaker voice (`None` = its first speaker).
    pub speaker: Option<u32>,
    /// Override of the voice's prior noise (`None` = the voice's own default).
    pub noise_scale: Option<f32>,
    /// Override of the voice's duration noise (`None` = the voice's own default).
    pub noise_w: Option<f32>,
}

impl Default for SynthesisParams {
    fn default() -> Self {
        Self {
            speed: 1.0,
            seed: None,
            speaker: None,
            noise_scale: None,
            noise_w: None,
        }
    }
}

/// A parameter outside its range; names the parameter as clients send it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("'{param}' must be between {min} and {max}, got {value}.")]
pub struct OutOfRange {
    pub param: &'static str,
    pub value: f64,
    pub min: f32,
    pub max: f32,
}

impl SynthesisParams {
    /// Checks every ranged field; the first violation wins.
    pub fn validate(&self) -> Result<(), OutOfRange> {
        check("speed", Some(self.speed), &SPEED)?;
        check("noise_scale", self.noise_scale, &NOISE)?;
        check("noise_w", self.noise_w, &NOISE)
    }

    /// The parameters of the `index`-th utterance of a synthesis seeded with `base_seed`: every
    /// utterance draws its own noise, and the same request seed still gives the same audio.
    pub fn for_item(&self, base_seed: u64, index: usize) -> Self {
        Self {
            seed: Some(base_seed.wrapping_add(index as u64)),
            ..*self
        }
    }

    /// The seed of an engine item (see [`SynthesisParams::for_item`]).
    pub fn item_seed(&self) -> u64 {
        self.seed.unwrap_or(0)
    }
}

fn check(
    param: &'static str,
    value: Option<f32>,
    range: &RangeInclusive<f32>,
) -> Result<(), OutOfRange> {
    match value {
        // NaN is outside every range, as `contains` says.
        Some(v) if !range.contains(&v) => Err(OutOfRange {
            param,
            value: f64::from(v),
            min: *range.start(),
            max: *range.end(),
        }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_inclusive_and_name_the_parameter() {
        let ok = |speed, noise| SynthesisParams {
            speed,
            noise_w: noise,
            ..Default::default()
        };
        assert!(ok(0.25, Some(0.0)).validate().is_ok());
        assert!(ok(4.0, Some(2.0)).validate().is_ok());
        assert_eq!(ok(4.01, None).validate().unwrap_err().param, "speed");
        assert_eq!(ok(f32::NAN, None).validate().unwrap_err().param, "speed");
        let err = ok(1.0, Some(2.5)).validate().unwrap_err();
        assert_eq!(err.param, "noise_w");
        assert_eq!(
            err.to_string(),
            "'noise_w' must be between 0 and 2, got 2.5."
        );
    }

    #[test]
    fn items_get_distinct_seeds_from_one_base() {
        let params = SynthesisParams::default();
        assert_eq!(params.for_item(10, 0).item_seed(), 10);
        assert_eq!(params.for_item(10, 3).item_seed(), 13);
        assert_eq!(params.for_item(u64::MAX, 1).item_seed(), 0);
    }
}

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

/// OmniVoice's decoding knobs, in the Python omnivoice-server's ranges (its `gt 0` and
/// unbounded ones bounded here, so that no request can ask for unbounded work).
pub mod generation {
    use std::ops::RangeInclusive;

    pub const NUM_STEP: RangeInclusive<f32> = 1.0..=64.0;
    pub const GUIDANCE_SCALE: RangeInclusive<f32> = 0.0..=10.0;
    pub const T_SHIFT: RangeInclusive<f32> = 0.0..=2.0;
    pub const POSITION_TEMPERATURE: RangeInclusive<f32> = 0.0..=10.0;
    pub const CLASS_TEMPERATURE: RangeInclusive<f32> = 0.0..=2.0;
    pub const LAYER_PENALTY_FACTOR: RangeInclusive<f32> = 0.0..=100.0;
    /// Seconds of the whole input.
    pub const DURATION: RangeInclusive<f32> = 0.1..=60.0;
    /// Seconds: chunks shorter than a second would cost a generation each for little audio.
    pub const AUDIO_CHUNK_DURATION: RangeInclusive<f32> = 1.0..=60.0;
    pub const AUDIO_CHUNK_THRESHOLD: RangeInclusive<f32> = 1.0..=600.0;

    /// The knobs a client sets by hand, with their ranges and whether they take whole numbers
    /// only: what the discovery route lists, so that no client copies a range.
    pub const KNOBS: [(&str, RangeInclusive<f32>, bool); 7] = [
        ("num_step", NUM_STEP, true),
        ("guidance_scale", GUIDANCE_SCALE, false),
        ("t_shift", T_SHIFT, false),
        ("position_temperature", POSITION_TEMPERATURE, false),
        ("class_temperature", CLASS_TEMPERATURE, false),
        ("layer_penalty_factor", LAYER_PENALTY_FACTOR, false),
        ("duration", DURATION, false),
    ];
}

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
    /// How an OmniVoice utterance is decoded; the other engines have no use for it.
    pub generation: Generation,
}

/// Settings a voice brings with it (a voice file's), weaker than the request's own: each one a
/// request leaves unset takes the voice's.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct VoiceDefaults {
    pub seed: Option<u64>,
    pub speed: Option<f64>,
    pub language: Option<String>,
    pub generation: Generation,
}

/// OmniVoice's generation fields (those of the Python omnivoice-server's requests); each
/// `None` means the model's own default.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct Generation {
    pub num_step: Option<u32>,
    pub guidance_scale: Option<f32>,
    pub t_shift: Option<f32>,
    pub position_temperature: Option<f32>,
    pub class_temperature: Option<f32>,
    pub layer_penalty_factor: Option<f32>,
    pub denoise: Option<bool>,
    /// Seconds of this utterance (a request's `duration` is shared among its utterances by
    /// their length).
    pub duration: Option<f32>,
    pub preprocess_prompt: Option<bool>,
    pub postprocess_output: Option<bool>,
    pub audio_chunk_duration: Option<f32>,
    pub audio_chunk_threshold: Option<f32>,
}

impl Generation {
    /// These fields, with `defaults`' where these are unset.
    pub fn or(self, defaults: Generation) -> Generation {
        Generation {
            num_step: self.num_step.or(defaults.num_step),
            guidance_scale: self.guidance_scale.or(defaults.guidance_scale),
            t_shift: self.t_shift.or(defaults.t_shift),
            position_temperature: self.position_temperature.or(defaults.position_temperature),
            class_temperature: self.class_temperature.or(defaults.class_temperature),
            layer_penalty_factor: self.layer_penalty_factor.or(defaults.layer_penalty_factor),
            denoise: self.denoise.or(defaults.denoise),
            duration: self.duration.or(defaults.duration),
            preprocess_prompt: self.preprocess_prompt.or(defaults.preprocess_prompt),
            postprocess_output: self.postprocess_output.or(defaults.postprocess_output),
            audio_chunk_duration: self.audio_chunk_duration.or(defaults.audio_chunk_duration),
            audio_chunk_threshold: self
                .audio_chunk_threshold
                .or(defaults.audio_chunk_threshold),
        }
    }

    /// Whether the chunking of long texts is set explicitly: then a stream is the official
    /// chunked audio, the same as the response body.
    pub fn sets_chunking(&self) -> bool {
        self.audio_chunk_duration.is_some() || self.audio_chunk_threshold.is_some()
    }

    /// Checks every ranged field; the first violation wins.
    pub fn validate(&self) -> Result<(), OutOfRange> {
        use generation::*;
        check("num_step", self.num_step.map(|n| n as f32), &NUM_STEP)?;
        check("guidance_scale", self.guidance_scale, &GUIDANCE_SCALE)?;
        check("t_shift", self.t_shift, &T_SHIFT)?;
        check(
            "position_temperature",
            self.position_temperature,
            &POSITION_TEMPERATURE,
        )?;
        check(
            "class_temperature",
            self.class_temperature,
            &CLASS_TEMPERATURE,
        )?;
        check(
            "layer_penalty_factor",
            self.layer_penalty_factor,
            &LAYER_PENALTY_FACTOR,
        )?;
        check("duration", self.duration, &DURATION)?;
        check(
            "audio_chunk_duration",
            self.audio_chunk_duration,
            &AUDIO_CHUNK_DURATION,
        )?;
        check(
            "audio_chunk_threshold",
            self.audio_chunk_threshold,
            &AUDIO_CHUNK_THRESHOLD,
        )
    }

    /// Whether any field is set: engines that do not generate this way refuse them.
    pub fn is_set(&self) -> bool {
        *self != Self::default()
    }
}

impl Default for SynthesisParams {
    fn default() -> Self {
        Self {
            speed: 1.0,
            seed: None,
            speaker: None,
            noise_scale: None,
            noise_w: None,
            generation: Generation::default(),
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
        check("noise_w", self.noise_w, &NOISE)?;
        self.generation.validate()
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
        let steps = |num_step| SynthesisParams {
            generation: Generation {
                num_step: Some(num_step),
                ..Default::default()
            },
            ..Default::default()
        };
        assert!(steps(1).validate().is_ok() && steps(64).validate().is_ok());
        assert_eq!(steps(65).validate().unwrap_err().param, "num_step");
        assert_eq!(steps(0).validate().unwrap_err().param, "num_step");
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

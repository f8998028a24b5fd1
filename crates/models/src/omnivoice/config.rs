//! OmniVoice's sizes, read from the checkpoint's `config.json` as `save_pretrained` writes it.
//!
//! Every size comes from the file, none from defaults: the released model and the test
//! models differ in all of them. Both spellings of the RoPE base that transformers has written
//! are accepted (`rope_theta`, and transformers 5's `rope_parameters.rope_theta`).

use std::path::Path;

use serde_json::Value;

use crate::error::{read_text, ModelError};

/// The whole model: the audio vocabulary around the language-model body.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Ids per codebook, the mask id included (1025 in the release).
    pub audio_vocab_size: usize,
    /// The id of a frame not decoded yet (1024).
    pub audio_mask_id: u32,
    /// Codebooks per frame (8).
    pub num_audio_codebook: usize,
    pub backbone: BackboneConfig,
}

/// The Qwen3 body (`llm_config`), used bidirectionally.
#[derive(Debug, Clone, PartialEq)]
pub struct BackboneConfig {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub num_key_value_heads: usize,
    pub head_dim: usize,
    pub rms_norm_eps: f64,
    pub rope_theta: f64,
}

impl Config {
    /// The checkpoint's `config.json`.
    pub fn from_file(path: &Path) -> Result<Self, ModelError> {
        Self::from_json(&read_text(path)?).map_err(|e| e.in_file(path))
    }

    /// The model's `config.json`, as text.
    pub fn from_json(text: &str) -> Result<Self, ModelError> {
        Self::parse(text).map_err(|e| match e {
            ModelError::Config(reason) => ModelError::Config(format!("config.json: {reason}")),
            other => other,
        })
    }

    fn parse(text: &str) -> Result<Self, ModelError> {
        let json: Value =
            serde_json::from_str(text).map_err(|e| ModelError::Config(format!("not JSON: {e}")))?;
        let llm = json
            .get("llm_config")
            .ok_or_else(|| ModelError::Config("no llm_config".into()))?;
        let model_type = llm.get("model_type").and_then(Value::as_str);
        if model_type != Some("qwen3") {
            return Err(ModelError::Config(format!(
                "llm_config.model_type is {model_type:?}, not \"qwen3\""
            )));
        }
        let activation = llm
            .get("hidden_act")
            .and_then(Value::as_str)
            .unwrap_or("silu");
        if activation != "silu" {
            return Err(ModelError::Config(format!(
                "llm_config.hidden_act is \"{activation}\", not \"silu\""
            )));
        }
        let hidden_size = size(llm, "llm_config", "hidden_size")?;
        let num_attention_heads = size(llm, "llm_config", "num_attention_heads")?;
        let head_dim = match llm.get("head_dim") {
            None | Some(Value::Null) => hidden_size / num_attention_heads,
            Some(_) => size(llm, "llm_config", "head_dim")?,
        };
        let rope_theta = llm
            .get("rope_theta")
            .or_else(|| llm.get("rope_parameters").and_then(|p| p.get("rope_theta")))
            .and_then(Value::as_f64)
            .ok_or_else(|| ModelError::Config("llm_config has no rope_theta".into()))?;
        let config = Config {
            audio_vocab_size: size(&json, "", "audio_vocab_size")?,
            audio_mask_id: size(&json, "", "audio_mask_id")? as u32,
            num_audio_codebook: size(&json, "", "num_audio_codebook")?,
            backbone: BackboneConfig {
                vocab_size: size(llm, "llm_config", "vocab_size")?,
                hidden_size,
                intermediate_size: size(llm, "llm_config", "intermediate_size")?,
                num_hidden_layers: size(llm, "llm_config", "num_hidden_layers")?,
                num_attention_heads,
                num_key_value_heads: size(llm, "llm_config", "num_key_value_heads")?,
                head_dim,
                rms_norm_eps: llm
                    .get("rms_norm_eps")
                    .and_then(Value::as_f64)
                    .ok_or_else(|| ModelError::Config("llm_config has no rms_norm_eps".into()))?,
                rope_theta,
            },
        };
        config.check()?;
        Ok(config)
    }

    fn check(&self) -> Result<(), ModelError> {
        let b = &self.backbone;
        if !b.num_attention_heads.is_multiple_of(b.num_key_value_heads) {
            return Err(ModelError::Config(format!(
                "{} attention heads cannot share {} key/value heads",
                b.num_attention_heads, b.num_key_value_heads
            )));
        }
        if !b.head_dim.is_multiple_of(2) {
            return Err(ModelError::Config(format!(
                "head_dim {} is odd: RoPE rotates pairs",
                b.head_dim
            )));
        }
        if self.audio_mask_id as usize >= self.audio_vocab_size {
            return Err(ModelError::Config(format!(
                "audio_mask_id {} is outside the audio vocabulary of {}",
                self.audio_mask_id, self.audio_vocab_size
            )));
        }
        // The text embedding is looked up at audio positions too, with audio ids.
        if b.vocab_size <= self.audio_mask_id as usize {
            return Err(ModelError::Config(format!(
                "the text vocabulary ({}) must be larger than audio_mask_id ({})",
                b.vocab_size, self.audio_mask_id
            )));
        }
        Ok(())
    }
}

/// A positive whole number at `key` of `object` (`within` names the object for the message).
fn size(object: &Value, within: &str, key: &str) -> Result<usize, ModelError> {
    let at = if within.is_empty() {
        key.to_string()
    } else {
        format!("{within}.{key}")
    };
    match object.get(key).and_then(Value::as_u64) {
        Some(n) if n > 0 => Ok(n as usize),
        Some(_) => Err(ModelError::Config(format!("{at} is 0"))),
        None => Err(ModelError::Config(format!(
            "{at} is missing or not a whole number"
        ))),
    }
}

//! A Piper voice's parameters, by VITS state-dict name: the weights argument of
//! [`super::Vits::load`].
//!
//! A voice comes as Piper's `.onnx` export ([`Weights::from_onnx`], read by `super::onnx`) or
//! as the safetensors that [`super::Vits::save_safetensors`] writes
//! ([`Weights::from_safetensors`]). Neither holds a model config, so both also keep the few
//! structure values the tensors do not show (the ONNX conv attributes, or the records saved
//! next to the tensors), from which [`super::VitsConfig::from_weights`] reads the config.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};

use super::onnx;
use crate::error::ModelError;

/// Safetensors keys that record the structure values the weights do not show.
const META_UPSAMPLE_RATES: &str = "__structure__.upsample_rates";
const META_RESBLOCK_DILATIONS: &str = "__structure__.resblock_dilations";
const META_WAVENET_DILATION_RATE: &str = "__structure__.wavenet_dilation_rate";

/// Values that are not visible in the weights, when the source file records them.
#[derive(Debug, Clone, Default)]
pub(crate) struct StructureHints {
    pub upsample_rates: Option<Vec<usize>>,
    pub resblock_dilations: Option<Vec<Vec<usize>>>,
    pub wavenet_dilation_rate: Option<usize>,
}

/// A voice's `f32` parameters on one device, and what the file says of its structure.
#[derive(Clone)]
pub struct Weights {
    pub(super) file: PathBuf,
    pub(super) tensors: HashMap<String, Tensor>,
    pub(super) hints: StructureHints,
    pub(super) device: Device,
}

impl Weights {
    /// Reads a Piper `.onnx` voice onto `device`.
    pub fn from_onnx(path: &Path, device: &Device) -> Result<Self, ModelError> {
        let weights = onnx::read_weights(path, device)?;
        let hints = hints_from_onnx(&weights.conv_attributes, &weights.tensors);
        Ok(Self {
            file: path.to_path_buf(),
            tensors: weights.tensors,
            hints,
            device: device.clone(),
        })
    }

    /// Reads a `.safetensors` written by [`super::Vits::save_safetensors`] onto `device`.
    pub fn from_safetensors(path: &Path, device: &Device) -> Result<Self, ModelError> {
        let mut tensors =
            candle_core::safetensors::load(path, device).map_err(|source| ModelError::Load {
                file: path.to_path_buf(),
                source,
            })?;
        let hints = take_structure_hints(&mut tensors, path)?;
        Ok(Self {
            file: path.to_path_buf(),
            tensors,
            hints,
            device: device.clone(),
        })
    }

    /// Parameters already named as in the VITS state dict (synthetic voices in tests), with
    /// no structure records; `file` names the source in errors.
    #[cfg(test)]
    pub(crate) fn from_tensors(
        tensors: HashMap<String, Tensor>,
        file: &Path,
        device: &Device,
    ) -> Self {
        Self {
            file: file.to_path_buf(),
            tensors,
            hints: StructureHints::default(),
            device: device.clone(),
        }
    }

    /// The file the weights came from.
    pub fn file(&self) -> &Path {
        &self.file
    }
}

/// Writes `tensors` and the structure values `hints` records of them to `path`.
pub(super) fn save_safetensors(
    tensors: &HashMap<String, Tensor>,
    hints: &StructureHints,
    path: &Path,
) -> Result<(), ModelError> {
    let mut tensors = tensors.clone();
    let cpu = Device::Cpu;
    let u32s = |v: &[usize]| v.iter().map(|&x| x as u32).collect::<Vec<u32>>();
    if let Some(rates) = &hints.upsample_rates {
        tensors.insert(META_UPSAMPLE_RATES.into(), Tensor::new(u32s(rates), &cpu)?);
    }
    if let Some(dilations) = &hints.resblock_dilations {
        let steps = dilations.first().map_or(0, |x| x.len());
        if dilations.iter().all(|x| x.len() == steps) {
            let flat = u32s(&dilations.concat());
            tensors.insert(
                META_RESBLOCK_DILATIONS.into(),
                Tensor::from_vec(flat, (dilations.len(), steps), &cpu)?,
            );
        }
    }
    if let Some(rate) = hints.wavenet_dilation_rate {
        tensors.insert(
            META_WAVENET_DILATION_RATE.into(),
            Tensor::new(&[rate as u32], &cpu)?,
        );
    }
    candle_core::safetensors::save(&tensors, path).map_err(|source| ModelError::Save {
        file: path.to_path_buf(),
        source,
    })
}

/// Removes the structure records written by `save_safetensors` from `tensors`.
fn take_structure_hints(
    tensors: &mut HashMap<String, Tensor>,
    file: &Path,
) -> Result<StructureHints, ModelError> {
    let mut take = |name: &str| -> Result<Option<Vec<Vec<usize>>>, ModelError> {
        let Some(t) = tensors.remove(name) else {
            return Ok(None);
        };
        let t = if t.rank() == 1 { t.unsqueeze(0) } else { Ok(t) };
        let rows = t
            .and_then(|t| t.to_dtype(DType::U32)?.to_vec2::<u32>())
            .map_err(|e| ModelError::Tensor {
                file: file.to_path_buf(),
                tensor: name.to_string(),
                reason: e.to_string(),
            })?;
        Ok(Some(
            rows.into_iter()
                .map(|r| r.into_iter().map(|x| x as usize).collect())
                .collect(),
        ))
    };
    Ok(StructureHints {
        upsample_rates: take(META_UPSAMPLE_RATES)?.map(|r| r.concat()),
        resblock_dilations: take(META_RESBLOCK_DILATIONS)?,
        wavenet_dilation_rate: take(META_WAVENET_DILATION_RATE)?
            .and_then(|r| r.concat().first().copied()),
    })
}

/// Extracts [`StructureHints`] from the ONNX conv attributes (module path → attributes).
fn hints_from_onnx(
    attrs: &HashMap<String, onnx::ConvAttributes>,
    tensors: &HashMap<String, Tensor>,
) -> StructureHints {
    let single = |v: &[i64]| (v.len() == 1 && v[0] > 0).then(|| v[0] as usize);
    let mut hints = StructureHints::default();

    let rates: Option<Vec<usize>> = (0..)
        .map_while(|i| attrs.get(&format!("dec.ups.{i}")))
        .map(|a| single(&a.strides))
        .collect();
    hints.upsample_rates = rates.filter(|r| !r.is_empty());

    let conv = if tensors.contains_key("dec.resblocks.0.convs1.0.weight") {
        "convs1"
    } else {
        "convs"
    };
    let kernels = (0..)
        .take_while(|j| tensors.contains_key(&format!("dec.resblocks.{j}.{conv}.0.weight")))
        .count();
    let mut dilations = Vec::new();
    for j in 0..kernels {
        let per_kernel: Option<Vec<usize>> = (0..)
            .map_while(|n| attrs.get(&format!("dec.resblocks.{j}.{conv}.{n}")))
            .map(|a| single(&a.dilations))
            .collect();
        dilations.push(per_kernel);
    }
    // Only the first stage is needed: every stage repeats the same kernels.
    let ups = hints.upsample_rates.as_ref().map_or(1, |r| r.len()).max(1);
    let per_stage = kernels / ups;
    let first_stage: Option<Vec<Vec<usize>>> = dilations.into_iter().take(per_stage).collect();
    hints.resblock_dilations =
        first_stage.filter(|d| !d.is_empty() && d.iter().all(|x| !x.is_empty()));

    // WaveNet layer i uses dilation rate^i; layer 1 reveals the rate.
    let first_coupling =
        (0..64).find(|i| attrs.contains_key(&format!("flow.flows.{i}.enc.in_layers.0")));
    if let Some(c) = first_coupling {
        hints.wavenet_dilation_rate = attrs
            .get(&format!("flow.flows.{c}.enc.in_layers.1"))
            .and_then(|a| single(&a.dilations));
    }
    hints
}

//! The one error type of the crate's loading and running: [`ModelError`].
//!
//! Every model loads the same way (see the crate doc), so every model fails the same way: a
//! file that cannot be read, is not the format it should be, lacks a tensor or holds one of
//! the wrong shape, or a config the port does not compute. Each of those names the file (and
//! the tensor). Errors about what a request asks for (an OmniVoice instruct, a reference
//! clip) are the models' own; [`ModelError::Input`] is only the plain "this input is outside
//! what the model takes".

use std::path::{Path, PathBuf};

/// Why a model could not be loaded, saved or run.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// A file could not be read (or written).
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A file is not what it should be (not ONNX, not JSON, a config this port refuses).
    #[error("{file}: {reason}")]
    Format { file: PathBuf, reason: String },
    /// A tensor the model needs is not in the file.
    #[error("{file}: tensor {tensor} is missing")]
    MissingTensor { file: PathBuf, tensor: String },
    /// A tensor is in the file but unusable (its shape, its type, its quantization).
    #[error("{file}: tensor {tensor}: {reason}")]
    Tensor {
        file: PathBuf,
        tensor: String,
        reason: String,
    },
    /// Building the model from a file's tensors failed (candle names the tensor).
    #[error("{file}: loading weights: {source}")]
    Load {
        file: PathBuf,
        #[source]
        source: candle_core::Error,
    },
    /// Writing a model's tensors failed.
    #[error("{file}: saving weights: {source}")]
    Save {
        file: PathBuf,
        #[source]
        source: candle_core::Error,
    },
    /// A config that names no file (given as a value or as text), which the model cannot
    /// take; [`ModelError::in_file`] places it in its file.
    #[error("{0}")]
    Config(String),
    /// An input outside what the model takes.
    #[error("invalid input: {0}")]
    Input(String),
    #[error(transparent)]
    Candle(#[from] candle_core::Error),
}

impl ModelError {
    /// The same error, said of `file` where it names none yet: a config's reason becomes
    /// [`ModelError::Format`], a bare candle error [`ModelError::Load`].
    pub fn in_file(self, file: &Path) -> Self {
        match self {
            Self::Config(reason) => Self::Format {
                file: file.to_path_buf(),
                reason,
            },
            Self::Candle(source) => Self::Load {
                file: file.to_path_buf(),
                source,
            },
            other => other,
        }
    }

    /// `file` could not be read.
    pub(crate) fn io(file: &Path, source: std::io::Error) -> Self {
        Self::Io {
            path: file.to_path_buf(),
            source,
        }
    }

    /// `file` is not what it should be.
    pub(crate) fn format(file: &Path, reason: impl ToString) -> Self {
        Self::Format {
            file: file.to_path_buf(),
            reason: reason.to_string(),
        }
    }
}

/// The text of `file`, or an error naming it.
pub(crate) fn read_text(file: &Path) -> Result<String, ModelError> {
    std::fs::read_to_string(file).map_err(|e| ModelError::io(file, e))
}

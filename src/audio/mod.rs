//! Audio encoders.

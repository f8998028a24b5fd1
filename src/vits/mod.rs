//! VITS inference in candle (the model behind Piper voices).

pub mod conv;

//! Text preparation.

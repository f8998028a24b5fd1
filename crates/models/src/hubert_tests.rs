//! HuBERT against the official code.

//! libespeak-ng bindings.

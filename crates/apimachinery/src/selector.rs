//! Selectors (to be written).

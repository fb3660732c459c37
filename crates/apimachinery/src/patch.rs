//! Patches (to be written).

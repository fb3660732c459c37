//! Watch cache (to be written).

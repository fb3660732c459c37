//! Structural schemas (placeholder: being written).

//! API server (to be written).

//! In-memory backend for unit tests (to be written).

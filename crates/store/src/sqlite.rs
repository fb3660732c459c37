//! Embedded durable SQLite backend (to be written).

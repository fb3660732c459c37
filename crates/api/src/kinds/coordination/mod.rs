pub mod lease;

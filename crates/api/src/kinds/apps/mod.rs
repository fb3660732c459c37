pub mod controller_revision;
pub mod daemon_set;
pub mod deployment;
pub mod replica_set;
pub mod stateful_set;

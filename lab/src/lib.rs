//! cairn-lab: several cairn nodes on one host, each a network namespace (or later a
//! privileged container) with its own containerd, cairn-agent and cairn-proxy, the first
//! one also running cairn-control; a switch namespace joins them and holds the lab's
//! registry. Everything the lab creates is recorded in its state file as it is created,
//! so `down` (or the next `up`, after a crash) removes exactly that.
//!
//! Operations live one per module (`up`, `down`, `status`); the address plan and the
//! components' command lines are pure (`plan`, `components`) and unit-tested.

pub mod cmd;
pub mod components;
pub mod daemon;
pub mod docker;
pub mod down;
pub mod driver;
pub mod drivers;
pub mod error;
pub mod images;
pub mod netns;
pub mod plan;
pub mod process;
pub mod replicas;
pub mod soak;
pub mod state;
pub mod status;
pub mod up;

pub use error::LabError;
pub use plan::{LabOptions, LabPlan};

//! cairn's scheduler: kube-scheduler's filters and scores over an in-memory snapshot
//! (pure, in [`algorithm`]), and around it the informers, the scheduling queue and
//! the asynchronous binder that talk to any Kubernetes API server.

pub mod algorithm;
pub mod config;
pub mod domain_cache;
pub mod fit_error;
pub mod framework;
pub mod metrics;
pub mod node_info;
pub mod plugins;
pub mod pod_info;
pub mod preemption;
pub mod queue;
pub mod scheduling_loop;
pub mod snapshot;
pub mod testing;
pub mod verdict;

pub use algorithm::{schedule, Cursor, Placement};
pub use fit_error::FitError;
pub use framework::Profile;
pub use pod_info::PodInfo;
pub use snapshot::Snapshot;

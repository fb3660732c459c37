//! Kubernetes semantics shared by the API server, the agent, the scheduler and the
//! controllers, typed over k8s-openapi and free of IO: resource quantities, a pod's
//! effective requests, QoS class, label/node selectors, taints and tolerations, a pod's
//! lifecycle state (active, ready, available) and scale-down order, and CronJob schedules
//! (whose named time zones come from the node's zoneinfo, read-only), what objects
//! charge against ResourceQuotas, and Go's duration text.

pub mod cron;
pub mod duration;
pub mod pod_state;
pub mod protocol;
pub mod qos;
pub mod quantity;
pub mod quota;
pub mod resources;
pub mod selector;
pub mod taints;

pub use quantity::QuantityError;
pub use resources::Resources;

pub mod horizontal_pod_autoscaler;

pub mod ingress;
pub mod ingress_class;
pub mod ip_address;
pub mod network_policy;
pub mod service_cidr;

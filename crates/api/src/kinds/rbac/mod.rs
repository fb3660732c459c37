pub mod cluster_role;
pub mod cluster_role_binding;
pub mod role;
pub mod role_binding;

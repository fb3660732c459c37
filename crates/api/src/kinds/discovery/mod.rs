pub mod endpoint_slice;

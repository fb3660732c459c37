//! Decoding of Kubernetes protobuf request bodies (to be written).

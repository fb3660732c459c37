//! Test harnesses: private containerd, local registry, test images.

//! CRI-shaped runtime trait and its containerd implementation.

//! Image references, registry pulls and imports into containerd.

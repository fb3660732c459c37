//! SPDY/3.1 server sessions, as the kubelet answers `kubectl exec/attach/port-forward`.
//!
//! Hand-written: no maintained Rust SPDY crate exists (SPDY is long deprecated), yet
//! kubectl before 1.30 execs only over SPDY, every kubectl's port-forward is SPDY (bare,
//! or tunnelled in websocket since 1.31), and newer kubectl falls back to it. Only what
//! those clients use is here: the frames (`frame`), the zlib header compression with the
//! SPDY/3 dictionary (`headers`), and a server session that answers client-opened streams
//! (`session`). The HTTP upgrade itself is the caller's.

mod dictionary;
pub mod frame;
pub mod headers;
pub mod session;

pub use dictionary::dictionary;
pub use session::{serve, IncomingStream, Session, StreamReader, StreamWriter};

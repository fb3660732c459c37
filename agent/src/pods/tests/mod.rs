//! Tests of the pod worker without root: its helpers, and its logic on the fake runtime
//! under tokio's paused clock (each test's minutes of back-off take milliseconds).

mod deletion;
mod harness;
mod helpers;
mod init;
mod lifecycle;
mod probes;
mod restarts;

//! cairn-cni: not implemented yet (see the open issues). The binary exists so the
//! workspace layout and packaging are fixed early.

fn main() -> std::process::ExitCode {
    eprintln!("cairn-cni: not implemented yet");
    std::process::ExitCode::from(2)
}

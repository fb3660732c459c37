//! cairn-cni: the CNI plugin binary. All logic lives in the library (`cairn_cni`).

fn main() -> std::process::ExitCode {
    cairn_cni::run()
}

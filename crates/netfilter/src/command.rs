//! Running a netfilter tool (`nft`, `iptables-restore`, ...) with an optional script on
//! its standard input; the drivers map failures to their own errors.

use std::io::{self, Write};
use std::path::Path;
use std::process::{Command, Output, Stdio};

pub(crate) fn run(binary: &Path, args: &[&str], stdin: Option<&str>) -> io::Result<Output> {
    let mut child = Command::new(binary)
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    if let (Some(input), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(input.as_bytes())?;
    }
    child.wait_with_output()
}

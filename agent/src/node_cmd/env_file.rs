//! The `/etc/cairn/<unit>.env` files the units read their arguments from
//! (`CAIRN_AGENT_ARGS="…"`): join sets its flags in them and keeps the operator's other
//! flags and lines. Pure text in, text out.
//!
//! systemd splits `$CAIRN_AGENT_ARGS` on whitespace, so a value cannot hold whitespace
//! or quotes; [`check_value`] refuses those rather than write a line systemd misreads.

/// The arguments `var` holds in an env file's text (its last assignment, as systemd
/// reads it), split on whitespace.
pub fn args_of(text: &str, var: &str) -> Vec<String> {
    text.lines()
        .filter_map(|line| assignment(line, var))
        .next_back()
        .map(|value| value.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}

/// The value of `line` if it assigns `var` (quotes removed).
fn assignment<'a>(line: &'a str, var: &str) -> Option<&'a str> {
    let rest = line.trim_start().strip_prefix(var)?.strip_prefix('=')?;
    let rest = rest.trim();
    let unquoted = rest
        .strip_prefix('"')
        .and_then(|r| r.strip_suffix('"'))
        .or_else(|| rest.strip_prefix('\'').and_then(|r| r.strip_suffix('\'')));
    Some(unquoted.unwrap_or(rest))
}

/// `args` without the flags named in `drop`, each with its value (`--flag value` or
/// `--flag=value`).
pub fn without_flags(args: &[String], drop: &[&str]) -> Vec<String> {
    let mut kept = Vec::new();
    let mut skip_value = false;
    for arg in args {
        if std::mem::take(&mut skip_value) && !arg.starts_with("--") {
            continue;
        }
        let name = arg.split('=').next().unwrap_or(arg);
        if drop.contains(&name) {
            skip_value = !arg.contains('=');
            continue;
        }
        kept.push(arg.clone());
    }
    kept
}

/// `text` with `var` set to `args`: its assignments replaced by one line where the
/// first was (appended when there was none), every other line kept.
pub fn with_args(text: &str, var: &str, args: &[String]) -> String {
    let line = format!("{var}=\"{}\"", args.join(" "));
    let mut out = String::new();
    let mut written = false;
    for l in text.lines() {
        if assignment(l, var).is_some() {
            if !std::mem::replace(&mut written, true) {
                out.push_str(&line);
                out.push('\n');
            }
            continue;
        }
        out.push_str(l);
        out.push('\n');
    }
    if !written {
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// Refuses a value an env file cannot carry.
pub fn check_value(what: &str, value: &str) -> Result<(), String> {
    match value
        .chars()
        .find(|c| c.is_whitespace() || matches!(c, '"' | '\'' | '\\'))
    {
        Some(c) => Err(format!(
            "{what} {value:?} cannot be written to a unit's environment file: it holds {c:?}"
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(s: &[&str]) -> Vec<String> {
        s.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn reads_the_last_assignment_quoted_or_not() {
        let text = "# comment\nCAIRN_AGENT_ARGS=\"--a 1\"\nOTHER=x\nCAIRN_AGENT_ARGS='--b  2'\n";
        assert_eq!(args_of(text, "CAIRN_AGENT_ARGS"), strings(&["--b", "2"]));
        assert_eq!(
            args_of("CAIRN_AGENT_ARGS=--c", "CAIRN_AGENT_ARGS"),
            strings(&["--c"])
        );
        assert!(args_of("CAIRN_AGENT_ARGSX=--c\n", "CAIRN_AGENT_ARGS").is_empty());
        assert!(args_of("", "CAIRN_AGENT_ARGS").is_empty());
    }

    #[test]
    fn drops_flags_with_their_values_in_both_spellings() {
        let args = strings(&[
            "--root-dir",
            "/r",
            "--server=https://a",
            "--cluster-dns",
            "10.96.0.10",
            "--token",
            "--verbose",
        ]);
        assert_eq!(
            without_flags(&args, &["--root-dir", "--server", "--token"]),
            strings(&["--cluster-dns", "10.96.0.10", "--verbose"])
        );
    }

    #[test]
    fn replaces_the_assignment_in_place_and_keeps_the_rest() {
        let text =
            "# kept\nCAIRN_AGENT_ARGS=\"--old\"\nRUST_LOG=debug\nCAIRN_AGENT_ARGS=\"--older\"\n";
        let out = with_args(text, "CAIRN_AGENT_ARGS", &strings(&["--new", "1"]));
        assert_eq!(
            out,
            "# kept\nCAIRN_AGENT_ARGS=\"--new 1\"\nRUST_LOG=debug\n"
        );
        assert_eq!(
            with_args("# only\n", "CAIRN_PROXY_ARGS", &strings(&["--x"])),
            "# only\nCAIRN_PROXY_ARGS=\"--x\"\n"
        );
    }

    #[test]
    fn refuses_values_systemd_would_split_or_unquote() {
        assert!(check_value("node name", "node-1").is_ok());
        assert!(check_value("server", "https://a:6443").is_ok());
        for bad in ["a b", "a\"b", "a'b", "a\\b", "a\tb"] {
            let e = check_value("root dir", bad).unwrap_err();
            assert!(e.starts_with("root dir"), "{e}");
        }
    }
}

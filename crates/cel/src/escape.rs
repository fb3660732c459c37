//! Property names as CEL identifiers, the way Kubernetes escapes them
//! (`k8s.io/apiserver/pkg/cel/escaping.go`): a property of an object schema is
//! reachable as `self.<escaped>` and `has(self.<escaped>)`.

/// Words the CEL grammar reserves. A property named like one of them (the
/// Gateway API's `namespace` above all) is reachable as `__<word>__`.
const RESERVED: [&str; 21] = [
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

/// The CEL identifier for property `name`, or `None` when the name cannot be
/// expressed as one (empty, starting with a digit, or holding a character
/// other than `[a-zA-Z0-9_./-]`). Such properties are left out of the CEL
/// object, as upstream does, but rules inside them still run.
///
/// `__` becomes `__underscores__`, `.` `__dot__`, `-` `__dash__` and `/`
/// `__slash__`, scanning left to right.
pub(crate) fn escape(name: &str) -> Option<String> {
    let first = name.chars().next()?;
    if first.is_ascii_digit() {
        return None;
    }
    if RESERVED.contains(&name) {
        return Some(format!("__{name}__"));
    }
    let mut out = String::with_capacity(name.len());
    let mut chars = name.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '_' if chars.peek() == Some(&'_') => {
                chars.next();
                out.push_str("__underscores__");
            }
            '.' => out.push_str("__dot__"),
            '-' => out.push_str("__dash__"),
            '/' => out.push_str("__slash__"),
            c if c.is_ascii_alphanumeric() || c == '_' => out.push(c),
            _ => return None,
        }
    }
    Some(out)
}

//! `pattern`s as Go's `regexp` (RE2) reads them, run on the `regex` crate.
//!
//! The two dialects are close; the differences that matter are bridged by rewriting the
//! pattern: Go's `\d`, `\s`, `\w` and `\b` are ASCII-only, a `[` inside a class and an
//! unbalanced `{` are literals in Go, and Go knows `\Q…\E`. Compile errors are reported in
//! Go's words where the cause is recognizable (`error parsing regexp: missing closing ):
//! ...`).

use std::cell::RefCell;
use std::collections::HashMap;

use regex::Regex;

const CACHE_LIMIT: usize = 512;

thread_local! {
    static CACHE: RefCell<HashMap<String, Result<Regex, String>>> = RefCell::new(HashMap::new());
}

/// The compiled pattern, or Go's error text for it.
pub(crate) fn compile(pattern: &str) -> Result<Regex, String> {
    let cached = CACHE.with(|c| c.borrow().get(pattern).cloned());
    if let Some(hit) = cached {
        return hit;
    }
    let compiled = Regex::new(&translate(pattern)).map_err(|e| go_error(pattern, &e.to_string()));
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        if c.len() >= CACHE_LIMIT {
            c.clear();
        }
        c.insert(pattern.to_string(), compiled.clone());
    });
    compiled
}

/// Whether `text` matches `pattern` anywhere (Go's `MatchString`); false if it does not compile.
pub(crate) fn matches(pattern: &str, text: &str) -> bool {
    compile(pattern).is_ok_and(|re| re.is_match(text))
}

fn class_escape(c: char, in_class: bool) -> Option<&'static str> {
    Some(match (c, in_class) {
        ('d', false) => "[0-9]",
        ('d', true) => "0-9",
        ('D', _) => "[^0-9]",
        ('s', false) => "[\\t\\n\\f\\r ]",
        ('s', true) => "\\t\\n\\f\\r ",
        ('S', _) => "[^\\t\\n\\f\\r ]",
        ('w', false) => "[0-9A-Za-z_]",
        ('w', true) => "0-9A-Za-z_",
        ('W', _) => "[^0-9A-Za-z_]",
        ('b', false) => "(?-u:\\b)",
        ('B', false) => "(?-u:\\B)",
        _ => return None,
    })
}

/// Whether `rest` (just after a `{`) is a counted repetition: `n}`, `n,}` or `n,m}`.
fn is_repetition(rest: &[char]) -> bool {
    let digits = |s: &[char]| s.iter().take_while(|c| c.is_ascii_digit()).count();
    let n = digits(rest);
    if n == 0 {
        return false;
    }
    match rest.get(n) {
        Some('}') => true,
        Some(',') => {
            let m = digits(&rest[n + 1..]);
            rest.get(n + 1 + m) == Some(&'}')
        }
        _ => false,
    }
}

/// Rewrites a Go pattern into the `regex` crate's dialect.
fn translate(pattern: &str) -> String {
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = String::with_capacity(pattern.len() + 8);
    let mut in_class = false;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        i += match c {
            '\\' if i + 1 < chars.len() => translate_escape(&chars, i + 1, in_class, &mut out),
            '[' if in_class => posix_class(&chars, i, &mut out),
            '[' => {
                in_class = true;
                class_head(&chars, i, &mut out)
            }
            ']' if in_class => {
                in_class = false;
                out.push(']');
                1
            }
            '&' | '~' | '-' if in_class && chars.get(i + 1) == Some(&c) => {
                out.push('\\');
                out.push(c);
                1
            }
            '{' if !in_class && is_repetition(&chars[i + 1..]) => {
                let len = chars[i..].iter().take_while(|&&x| x != '}').count() + 1;
                out.extend(&chars[i..i + len]);
                len
            }
            '{' | '}' if !in_class => {
                out.push('\\');
                out.push(c);
                1
            }
            _ => {
                out.push(c);
                1
            }
        };
    }
    out
}

/// A `[` inside a class: a POSIX class such as `[:alpha:]` (copied), else a literal.
fn posix_class(chars: &[char], at: usize, out: &mut String) -> usize {
    if chars.get(at + 1) == Some(&':') {
        let end = (at + 2..chars.len().saturating_sub(1))
            .find(|&j| chars[j] == ':' && chars[j + 1] == ']');
        if let Some(end) = end {
            out.extend(&chars[at..=end + 1]);
            return end + 2 - at;
        }
    }
    out.push_str("\\[");
    1
}

/// Opens a class: `[`, an optional `^`, then a `]` that Go reads as a literal. Returns how
/// many characters were used.
fn class_head(chars: &[char], at: usize, out: &mut String) -> usize {
    out.push('[');
    let mut j = at + 1;
    if chars.get(j) == Some(&'^') {
        out.push('^');
        j += 1;
    }
    if chars.get(j) == Some(&']') {
        out.push_str("\\]");
        j += 1;
    }
    j - at
}

/// Translates the escape whose letter is at `at`; returns how many characters were used
/// (including the backslash).
fn translate_escape(chars: &[char], at: usize, in_class: bool, out: &mut String) -> usize {
    let c = chars[at];
    if let Some(rep) = class_escape(c, in_class) {
        out.push_str(rep);
        return 2;
    }
    if c == 'Q' {
        let mut j = at + 1;
        while j < chars.len() && !(chars[j] == '\\' && chars.get(j + 1) == Some(&'E')) {
            out.push_str(&regex::escape(&chars[j].to_string()));
            j += 1;
        }
        let end = if j < chars.len() { j + 2 } else { j };
        return end - (at - 1);
    }
    out.push('\\');
    out.push(c);
    if matches!(c, 'p' | 'P' | 'x') && chars.get(at + 1) == Some(&'{') {
        // \p{Greek}, \x{10FFFF}: copied through the closing brace
        let len = chars[at + 1..].iter().take_while(|&&x| x != '}').count();
        let end = (at + 1 + len + 1).min(chars.len());
        out.extend(&chars[at + 1..end]);
        return end - (at - 1);
    }
    2
}

/// Go's wording for a pattern that does not compile.
fn go_error(pattern: &str, rust: &str) -> String {
    let (code, expr) = if rust.contains("unclosed group") {
        ("missing closing )", pattern.to_string())
    } else if rust.contains("unopened group") {
        ("unexpected )", pattern.to_string())
    } else if rust.contains("unclosed character class") {
        let from = pattern.find('[').unwrap_or(0);
        ("missing closing ]", pattern[from..].to_string())
    } else if rust.contains("repetition operator missing expression") {
        let op = pattern
            .chars()
            .find(|c| matches!(c, '*' | '+' | '?'))
            .unwrap_or('*');
        ("missing argument to repetition operator", op.to_string())
    } else if rust.contains("unrecognized escape sequence") {
        ("invalid escape sequence", first_bad_escape(pattern))
    } else if rust.contains("invalid character class range") {
        ("invalid character class range", pattern.to_string())
    } else if rust.contains("exceeds size limit") {
        ("expression too large", pattern.to_string())
    } else {
        ("invalid syntax", pattern.to_string())
    };
    format!("error parsing regexp: {code}: `{expr}`")
}

fn first_bad_escape(pattern: &str) -> String {
    let chars: Vec<char> = pattern.chars().collect();
    let known = "\\.+*?()|[]{}^$-&~#\"' /aftnrvdDsSwWbBpPQEzAx0123456789";
    let mut i = 0;
    while i + 1 < chars.len() {
        if chars[i] == '\\' {
            if !known.contains(chars[i + 1]) {
                return format!("\\{}", chars[i + 1]);
            }
            i += 2;
        } else {
            i += 1;
        }
    }
    pattern.to_string()
}

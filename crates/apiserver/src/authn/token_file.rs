//! Static bearer tokens (`--token-auth-file`), upstream's CSV format: one token per line,
//! `token,user,uid,"group1,group2"`; at least three columns; blank lines and lines
//! starting with `#` are skipped.

use std::collections::HashMap;
use std::path::Path;

use cairn_auth::UserInfo;

#[derive(Debug, thiserror::Error)]
pub enum TokenFileError {
    #[error("reading token file {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("token file {path}, line {line}: {reason}")]
    Line {
        path: String,
        line: usize,
        reason: String,
    },
}

pub fn load(path: &Path) -> Result<HashMap<String, UserInfo>, TokenFileError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| TokenFileError::Read {
        path: shown.clone(),
        source,
    })?;
    parse(&text).map_err(|(line, reason)| TokenFileError::Line {
        path: shown,
        line,
        reason,
    })
}

pub fn parse(text: &str) -> Result<HashMap<String, UserInfo>, (usize, String)> {
    let mut tokens = HashMap::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let cols = csv_columns(line).map_err(|r| (i + 1, r))?;
        if cols.len() < 3 {
            return Err((i + 1, format!("{} columns, want at least 3", cols.len())));
        }
        if cols[0].is_empty() || cols[1].is_empty() {
            return Err((i + 1, "empty token or user".into()));
        }
        let groups = cols
            .get(3)
            .map(|g| {
                g.split(',')
                    .map(str::trim)
                    .filter(|g| !g.is_empty())
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        let mut user = UserInfo::new(cols[1].clone(), groups);
        user.uid = cols[2].clone();
        if tokens.insert(cols[0].clone(), user).is_some() {
            return Err((i + 1, "duplicate token".into()));
        }
    }
    Ok(tokens)
}

/// Splits one CSV line; a quoted column may hold commas, `""` is a quote.
fn csv_columns(line: &str) -> Result<Vec<String>, String> {
    let mut cols = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            ('"', true) => quoted = false,
            ('"', false) if cur.is_empty() => quoted = true,
            (',', false) => cols.push(std::mem::take(&mut cur)),
            (c, _) => cur.push(c),
        }
    }
    if quoted {
        return Err("unterminated quote".into());
    }
    cols.push(cur);
    Ok(cols.into_iter().map(|c| c.trim().to_string()).collect())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn upstream_format_with_quoted_groups() {
        let t = parse("# comment\nt1,alice,u1,\"dev,ops\"\n\nt2,bob,u2\n").unwrap();
        assert_eq!(t["t1"].username, "alice");
        assert_eq!(t["t1"].uid, "u1");
        assert_eq!(t["t1"].groups, vec!["dev", "ops"]);
        assert!(t["t2"].groups.is_empty());
    }

    #[test]
    fn bad_lines_name_their_number() {
        assert_eq!(parse("t1,alice\n").unwrap_err().0, 1);
        assert_eq!(parse("a,b,c\na,d,e\n").unwrap_err().1, "duplicate token");
        assert_eq!(parse("ok,u,1\n\"x,y,z\n").unwrap_err().0, 2);
    }
}

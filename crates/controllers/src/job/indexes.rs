//! Completion indexes of Indexed Jobs: `status.completedIndexes` is a compressed list of
//! intervals (`1,3-5,7`), and each pod carries its index in an annotation (and label).

use std::collections::BTreeSet;

use cairn_semantics::pod_state::PodView;

pub const INDEX_ANNOTATION: &str = "batch.kubernetes.io/job-completion-index";

/// The pod's completion index, if it has a valid one below `completions`.
pub fn index_of<P: PodView + ?Sized>(pod: &P, completions: i32) -> Option<i32> {
    let i: i32 = pod.annotation(INDEX_ANNOTATION)?.parse().ok()?;
    (0..completions).contains(&i).then_some(i)
}

/// Parses `1,3-5`; entries that do not parse are skipped (upstream ignores them too).
pub fn parse(list: &str) -> BTreeSet<i32> {
    let mut out = BTreeSet::new();
    for part in list.split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<i32>(), b.parse::<i32>()) {
                    out.extend(a..=b);
                }
            }
            None => {
                if let Ok(i) = part.parse() {
                    out.insert(i);
                }
            }
        }
    }
    out
}

/// Formats indexes as `1,3-5,7` (runs of three or more, and of two, as upstream does:
/// any run of consecutive indexes becomes `a-b`).
pub fn format(indexes: &BTreeSet<i32>) -> String {
    let mut parts = Vec::new();
    let mut iter = indexes.iter().copied().peekable();
    while let Some(start) = iter.next() {
        let mut end = start;
        while iter.peek() == Some(&(end + 1)) {
            end += 1;
            iter.next();
        }
        parts.push(if end == start {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
    }
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let set = parse("0,2-4,7,8");
        assert_eq!(set.iter().copied().collect::<Vec<_>>(), [0, 2, 3, 4, 7, 8]);
        assert_eq!(format(&set), "0,2-4,7-8");
        assert_eq!(format(&BTreeSet::new()), "");
        assert_eq!(parse("x,1").len(), 1);
    }
}

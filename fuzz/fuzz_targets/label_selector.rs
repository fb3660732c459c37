//! Parses arbitrary strings as label selectors; a parsed selector must print and
//! re-parse to itself, and matching must agree between the two.
//! Input: `selector\nkey=value\nkey=value...` (the label lines build the label set).
#![no_main]

use std::collections::BTreeMap;

use cairn_apimachinery::selector::LabelSelector;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut lines = text.split('\n');
    let selector = lines.next().unwrap_or_default();
    let labels: BTreeMap<String, String> = lines
        .map(|l| match l.split_once('=') {
            Some((k, v)) => (k.to_string(), v.to_string()),
            None => (l.to_string(), String::new()),
        })
        .collect();
    let Ok(parsed) = selector.parse::<LabelSelector>() else {
        return;
    };
    let matched = parsed.matches(&labels);
    let printed = parsed.to_string();
    let reparsed: LabelSelector = printed
        .parse()
        .unwrap_or_else(|e| panic!("{selector:?} printed as {printed:?}, which fails: {e}"));
    assert_eq!(parsed, reparsed, "{selector:?} printed as {printed:?}");
    assert_eq!(matched, reparsed.matches(&labels));
    let _ = parsed.is_empty();
    for r in parsed.requirements() {
        let _ = parsed.requires_exact_match(r.key());
    }
});

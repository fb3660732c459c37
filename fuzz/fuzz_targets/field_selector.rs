//! Parses arbitrary strings as field selectors; a parsed selector must print and
//! re-parse to the same terms, and matching must agree between the two.
//! Input: `selector\nfield=value\n...` (the field lines build the field set).
#![no_main]

use std::collections::BTreeMap;

use cairn_apimachinery::selector::FieldSelector;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut lines = text.split('\n');
    let selector = lines.next().unwrap_or_default();
    let fields: BTreeMap<String, String> = lines
        .map(|l| match l.split_once('=') {
            Some((k, v)) => (k.to_string(), v.to_string()),
            None => (l.to_string(), String::new()),
        })
        .collect();
    let Ok(parsed) = selector.parse::<FieldSelector>() else {
        return;
    };
    let printed = parsed.to_string();
    let reparsed: FieldSelector = printed
        .parse()
        .unwrap_or_else(|e| panic!("{selector:?} printed as {printed:?}, which fails: {e}"));
    let mut a: Vec<_> = parsed.requirements().collect();
    let mut b: Vec<_> = reparsed.requirements().collect();
    a.sort_unstable_by_key(|t| format!("{t:?}"));
    b.sort_unstable_by_key(|t| format!("{t:?}"));
    assert_eq!(a, b, "{selector:?} printed as {printed:?}");
    assert_eq!(parsed.matches(&fields), reparsed.matches(&fields));
    for (field, _, _) in parsed.requirements() {
        let _ = parsed.single_value(field);
    }
});

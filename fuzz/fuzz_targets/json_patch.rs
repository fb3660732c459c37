//! Applies a JSON patch (and, for good measure, a JSON merge patch) to a document.
//! Input: `<document JSON>\xff<patch JSON>`.
#![no_main]

use cairn_apimachinery::patch::{json_patch, merge_patch};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Some(split) = data.iter().position(|&b| b == 0xff) else {
        return;
    };
    let (Ok(doc), Ok(patch)) = (
        serde_json::from_slice::<Value>(&data[..split]),
        serde_json::from_slice::<Value>(&data[split + 1..]),
    ) else {
        return;
    };
    if let Ok(out) = json_patch(&doc, &patch) {
        let _ = serde_json::to_vec(&out);
    }
    let merged = merge_patch(&doc, &patch);
    // Applying the same merge patch twice changes nothing more (RFC 7386 is idempotent).
    assert_eq!(merge_patch(&merged, &patch), merged);
});

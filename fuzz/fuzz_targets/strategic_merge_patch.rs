//! Applies a strategic merge patch to an original document.
//! Input: `<kind byte><original JSON>\xff<patch JSON>`; the kind byte picks one of
//! the built-in kinds (or an unknown one).
#![no_main]

use cairn_apimachinery::patch::{strategic_merge_patch, STRATEGIC_KINDS};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fn has_directive_key(v: &Value) -> bool {
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        match v {
            Value::Object(m) => {
                if m.keys().any(|k| {
                    k == "$patch"
                        || k == "$retainKeys"
                        || k.starts_with("$setElementOrder")
                        || k.starts_with("$deleteFromPrimitiveList")
                }) {
                    return true;
                }
                stack.extend(m.values());
            }
            Value::Array(a) => stack.extend(a.iter()),
            _ => {}
        }
    }
    false
}

fuzz_target!(|data: &[u8]| {
    let Some((&kind_byte, rest)) = data.split_first() else {
        return;
    };
    let kind = STRATEGIC_KINDS
        .get(usize::from(kind_byte) % (STRATEGIC_KINDS.len() + 1))
        .copied()
        .unwrap_or("Unknown");
    let Some(split) = rest.iter().position(|&b| b == 0xff) else {
        return;
    };
    let (Ok(original), Ok(patch)) = (
        serde_json::from_slice::<Value>(&rest[..split]),
        serde_json::from_slice::<Value>(&rest[split + 1..]),
    ) else {
        return;
    };
    if let Ok(out) = strategic_merge_patch(&original, &patch, kind) {
        if !has_directive_key(&original) {
            assert!(!has_directive_key(&out), "directive leaked into {out}");
        }
        let _ = serde_json::to_vec(&out);
    }
});

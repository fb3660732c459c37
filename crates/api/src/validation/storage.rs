//! Storage amounts, as PersistentVolumes and claims both check them; each kind's own rules
//! are its kind's (`kinds/core/persistent_volume.rs`, `kinds/core/persistent_volume_claim.rs`,
//! `kinds/storage/storage_class.rs`).

use super::*;

/// A storage amount: present, and more than zero.
pub(crate) fn positive_storage(v: Option<&Value>, path: &str, errs: &mut Vec<Cause>) {
    let Some(v) = v else {
        errs.push(Cause::required(path.to_string()));
        return;
    };
    let text = v.as_str().map_or_else(|| v.to_string(), str::to_string);
    if quantity::nanos(&text).is_some_and(|n| n <= 0) {
        errs.push(Cause::invalid(
            path.to_string(),
            &text,
            "must be greater than zero",
        ));
    }
}

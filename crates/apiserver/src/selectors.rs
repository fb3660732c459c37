//! Label and field selectors of a list or watch request, matched against the labels and
//! fields the watch cache extracted for each object.

use cairn_api::registry::ResourceInfo;
use cairn_api::status::Status;
use cairn_apimachinery::selector::{FieldSelector, LabelSelector};
use cairn_store::cache::CachedObject;

use crate::request::Query;

#[derive(Debug, Default)]
pub struct Selectors {
    label: Option<LabelSelector>,
    field: Option<FieldSelector>,
}

impl Selectors {
    pub fn from_query(r: &ResourceInfo, q: &Query) -> Result<Selectors, Status> {
        let label =
            match q.get("labelSelector").filter(|s| !s.trim().is_empty()) {
                Some(s) => Some(s.parse::<LabelSelector>().map_err(|e| {
                    Status::bad_request(format!("unable to parse requirement: {e}"))
                })?),
                None => None,
            };
        let field = match q.get("fieldSelector").filter(|s| !s.trim().is_empty()) {
            Some(s) => {
                let f = s
                    .parse::<FieldSelector>()
                    .map_err(|e| Status::bad_request(format!("invalid field selector: {e}")))?;
                for (key, _, _) in f.requirements() {
                    if !r.supports_field_selector(key) {
                        return Err(Status::bad_request(format!(
                            "field label not supported: {key}"
                        )));
                    }
                }
                Some(f)
            }
            None => None,
        };
        Ok(Selectors { label, field })
    }

    pub fn is_empty(&self) -> bool {
        self.label.is_none() && self.field.is_none()
    }

    pub fn matches(&self, o: &CachedObject) -> bool {
        self.label.as_ref().is_none_or(|l| l.matches(&o.labels))
            && self.field.as_ref().is_none_or(|f| f.matches(&o.fields))
    }

    /// The name a `metadata.name=X` field selector pins, if any.
    pub fn pinned_name(&self) -> Option<&str> {
        self.field.as_ref()?.single_value("metadata.name")
    }
}

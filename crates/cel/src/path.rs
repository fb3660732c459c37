//! Field paths rendered as `k8s.io/apimachinery/pkg/util/validation/field.Path`
//! renders them: `spec.rules[0].matches`, `spec.labels[app]`, and `<nil>`
//! for the root of a custom resource (upstream validates it with a nil path).

/// A field path; `None` is the nil root path.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct FieldPath(Option<String>);

impl FieldPath {
    /// The nil path, where a custom resource's validation starts.
    pub(crate) fn root() -> Self {
        FieldPath(None)
    }

    /// A path starting at `prefix` (e.g. `spec.versions[0].schema.openAPIV3Schema`);
    /// an empty prefix is the nil path.
    pub(crate) fn from_prefix(prefix: &str) -> Self {
        if prefix.is_empty() {
            FieldPath(None)
        } else {
            FieldPath(Some(prefix.to_owned()))
        }
    }

    /// `.name`, or just `name` on the nil path.
    pub(crate) fn child(&self, name: &str) -> Self {
        match &self.0 {
            None => FieldPath(Some(name.to_owned())),
            Some(p) => FieldPath(Some(format!("{p}.{name}"))),
        }
    }

    /// `[i]`.
    pub(crate) fn index(&self, i: usize) -> Self {
        self.subscript(&i.to_string())
    }

    /// `[key]`, unquoted as upstream prints map keys.
    pub(crate) fn key(&self, key: &str) -> Self {
        self.subscript(key)
    }

    fn subscript(&self, sub: &str) -> Self {
        let base = self.0.as_deref().unwrap_or("");
        FieldPath(Some(format!("{base}[{sub}]")))
    }

    pub(crate) fn render(&self) -> String {
        self.0.clone().unwrap_or_else(|| "<nil>".to_owned())
    }
}

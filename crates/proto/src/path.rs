//! JSON paths of fields, built on the stack while converting and rendered only for errors.

/// A position in the object being converted: a chain of segments from the root.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Path<'a> {
    parent: Option<&'a Path<'a>>,
    seg: Seg<'a>,
}

#[derive(Clone, Copy, Debug)]
enum Seg<'a> {
    Root,
    Field(&'a str),
    Index(usize),
    Key(&'a str),
    Unknown(u32),
}

impl<'a> Path<'a> {
    /// The object itself.
    pub(crate) const fn root() -> Path<'static> {
        Path {
            parent: None,
            seg: Seg::Root,
        }
    }

    /// The field `name` (JSON name) of this object.
    pub(crate) fn field(&'a self, name: &'a str) -> Path<'a> {
        self.child(Seg::Field(name))
    }

    /// Element `index` of this list.
    pub(crate) fn index(&'a self, index: usize) -> Path<'a> {
        self.child(Seg::Index(index))
    }

    /// Entry `key` of this map.
    pub(crate) fn key(&'a self, key: &'a str) -> Path<'a> {
        self.child(Seg::Key(key))
    }

    /// A protobuf field with tag `tag` that has no JSON name.
    pub(crate) fn unknown(&'a self, tag: u32) -> Path<'a> {
        self.child(Seg::Unknown(tag))
    }

    fn child(&'a self, seg: Seg<'a>) -> Path<'a> {
        Path {
            parent: Some(self),
            seg,
        }
    }

    /// Renders the path as `spec.containers[0].ports[1].containerPort` (`.` for the root).
    pub(crate) fn render(&self) -> String {
        let mut segs = Vec::new();
        let mut cur = Some(self);
        while let Some(p) = cur {
            segs.push(p.seg);
            cur = p.parent;
        }
        let mut out = String::new();
        for seg in segs.iter().rev() {
            match seg {
                Seg::Root => {}
                Seg::Field(name) => {
                    if !out.is_empty() {
                        out.push('.');
                    }
                    out.push_str(name);
                }
                Seg::Index(i) => {
                    out.push('[');
                    out.push_str(&i.to_string());
                    out.push(']');
                }
                Seg::Key(k) => {
                    out.push('[');
                    out.push_str(k);
                    out.push(']');
                }
                Seg::Unknown(tag) => {
                    if !out.is_empty() {
                        out.push('.');
                    }
                    out.push_str("(protobuf field ");
                    out.push_str(&tag.to_string());
                    out.push(')');
                }
            }
        }
        if out.is_empty() {
            out.push('.');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::Path;

    #[test]
    fn renders_paths() {
        let root = Path::root();
        assert_eq!(root.render(), ".");
        let spec = root.field("spec");
        let containers = spec.field("containers");
        let first = containers.index(0);
        let limits = first.field("resources");
        let limits = limits.field("limits");
        let cpu = limits.key("cpu");
        assert_eq!(cpu.render(), "spec.containers[0].resources.limits[cpu]");
        assert_eq!(
            first.unknown(99).render(),
            "spec.containers[0].(protobuf field 99)"
        );
        assert_eq!(root.unknown(7).render(), "(protobuf field 7)");
    }
}

//! Which name format a kind's objects must have (a leaf: kinds name theirs without
//! depending on validation).

/// The name format a kind's objects must have (upstream's `ValidateObjectMeta` name funcs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameRule {
    PathSegment,
    Subdomain,
    Label,
    Dns1035,
}

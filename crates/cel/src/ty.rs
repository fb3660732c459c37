//! The static types the checker infers, with the size bounds the cost
//! estimator needs (cel-go keeps sizes apart from types; one enum is enough
//! here).

use crate::decl::{Decl, DeclKind, MAX_REQUEST_SIZE};
use std::sync::Arc;

/// Any size a value from a request can have.
pub(crate) const UNBOUNDED: u64 = MAX_REQUEST_SIZE - 2;

#[derive(Clone, Debug)]
pub(crate) enum Ty {
    /// Unknown until runtime: `dyn`, `x-kubernetes-int-or-string`, and the
    /// results this checker does not model. Carries a size bound.
    Dyn(u64),
    Bool,
    Int,
    Uint,
    Double,
    String(u64),
    Bytes(u64),
    Null,
    Duration,
    Timestamp,
    Type,
    List(Box<Ty>, u64),
    Map(Box<Ty>, Box<Ty>, u64),
    /// An object schema with `properties`.
    Object(Arc<Decl>),
    Optional(Box<Ty>),
    /// `net.IP`, `net.IPPrefix`, `kubernetes.URL`, `kubernetes.Quantity`.
    Opaque(&'static str),
}

impl Ty {
    pub(crate) fn dyn_() -> Ty {
        Ty::Dyn(UNBOUNDED)
    }

    pub(crate) fn from_decl(d: &Arc<Decl>) -> Ty {
        let max = d.max_elements;
        match &d.kind {
            DeclKind::Bool => Ty::Bool,
            DeclKind::Int => Ty::Int,
            DeclKind::Double => Ty::Double,
            DeclKind::String => Ty::String(max),
            DeclKind::Bytes => Ty::Bytes(max),
            DeclKind::Duration => Ty::Duration,
            DeclKind::Timestamp => Ty::Timestamp,
            DeclKind::IntOrString => Ty::Dyn(max),
            DeclKind::List(elem) => Ty::List(Box::new(Ty::from_decl(elem)), max),
            // Upstream declares map keys without a size, which its estimator
            // reads as zero.
            DeclKind::Map(elem) => {
                Ty::Map(Box::new(Ty::String(0)), Box::new(Ty::from_decl(elem)), max)
            }
            DeclKind::Object(_) => Ty::Object(Arc::clone(d)),
        }
    }

    /// Elements of a list or map, characters of a string: cel-go's size
    /// estimate; scalars have size 1.
    pub(crate) fn size(&self) -> u64 {
        match self {
            Ty::Dyn(n) | Ty::String(n) | Ty::Bytes(n) | Ty::List(_, n) | Ty::Map(_, _, n) => *n,
            _ => 1,
        }
    }

    pub(crate) fn with_size(self, n: u64) -> Ty {
        match self {
            Ty::Dyn(_) => Ty::Dyn(n),
            Ty::String(_) => Ty::String(n),
            Ty::Bytes(_) => Ty::Bytes(n),
            Ty::List(e, _) => Ty::List(e, n),
            Ty::Map(k, v, _) => Ty::Map(k, v, n),
            other => other,
        }
    }

    pub(crate) fn is_dyn(&self) -> bool {
        matches!(self, Ty::Dyn(_))
    }

    /// The element (list) or key (map) a comprehension iterates over.
    pub(crate) fn iter_elem(&self) -> Ty {
        match self {
            Ty::List(e, _) => (**e).clone(),
            Ty::Map(k, _, _) => (**k).clone(),
            _ => Ty::dyn_(),
        }
    }

    /// The value `x[i]` yields.
    pub(crate) fn index_elem(&self) -> Ty {
        match self {
            Ty::List(e, _) => (**e).clone(),
            Ty::Map(_, v, _) => (**v).clone(),
            _ => Ty::dyn_(),
        }
    }

    /// The name cel-go prints for the type in its messages.
    pub(crate) fn name(&self) -> String {
        match self {
            Ty::Dyn(_) => "dyn".into(),
            Ty::Bool => "bool".into(),
            Ty::Int => "int".into(),
            Ty::Uint => "uint".into(),
            Ty::Double => "double".into(),
            Ty::String(_) => "string".into(),
            Ty::Bytes(_) => "bytes".into(),
            Ty::Null => "null_type".into(),
            Ty::Duration => "google.protobuf.Duration".into(),
            Ty::Timestamp => "google.protobuf.Timestamp".into(),
            Ty::Type => "type".into(),
            Ty::List(e, _) => format!("list({})", e.name()),
            Ty::Map(k, v, _) => format!("map({}, {})", k.name(), v.name()),
            Ty::Object(_) => "object".into(),
            Ty::Optional(t) => format!("optional_type({})", t.name()),
            Ty::Opaque(n) => (*n).into(),
        }
    }

    /// The wider of two branch types: `null` takes the other's type, equal
    /// kinds keep theirs (preferring a known element type), else `dyn`.
    pub(crate) fn join(a: Ty, b: Ty) -> Ty {
        let size = a.size().max(b.size());
        match (a, b) {
            (Ty::Null, other) | (other, Ty::Null) => other,
            (a, b) if std::mem::discriminant(&a) == std::mem::discriminant(&b) => {
                let a_unknown = matches!(&a, Ty::List(e, _) if e.is_dyn());
                if a_unknown {
                    b.with_size(size)
                } else {
                    a.with_size(size)
                }
            }
            _ => Ty::Dyn(size),
        }
    }
}

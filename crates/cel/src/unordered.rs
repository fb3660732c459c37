//! Lists whose order does not matter to equality, as upstream compares
//! `x-kubernetes-list-type: set` and `map` lists: `self == oldSelf` holds
//! for a reordered list. Everything else is the plain list's; a plain list
//! compared with one of these still compares in order, as in cel-go, where
//! the left operand decides.

use cel::common::traits::{Adder, Container, Indexer, Iterable, Sizer, Zeroer};
use cel::common::types::{CelList, CelString, Kind, Type, LIST_TYPE};
use cel::common::value::{Builtin, BuiltinRef, Val};
use std::sync::Arc;

#[derive(Debug, Clone)]
pub(crate) struct UnorderedList<'v> {
    inner: CelList<'v>,
    /// The list-map keys (escaped, as the items' fields are); none for a set.
    keys: Arc<[String]>,
}

impl<'v> UnorderedList<'v> {
    pub(crate) fn new(inner: CelList<'v>, keys: Arc<[String]>) -> Self {
        UnorderedList { inner, keys }
    }

    fn same_keys(&self, a: &dyn Val, b: &dyn Val) -> bool {
        let (Some(a), Some(b)) = (a.as_indexer(), b.as_indexer()) else {
            return false;
        };
        self.keys.iter().all(|key| {
            let key = CelString::from(key.as_str());
            match (a.get(&key), b.get(&key)) {
                (Ok(x), Ok(y)) => x.equals(y.as_ref()),
                _ => false,
            }
        })
    }
}

impl<'v> Val for UnorderedList<'v> {
    fn get_type(&self) -> &Type {
        &LIST_TYPE
    }

    fn cel_type() -> &'static Type {
        &LIST_TYPE
    }

    fn as_adder<'b, 'w>(&'b self) -> Option<&'b (dyn Adder + 'w)>
    where
        Self: 'w,
    {
        self.inner.as_adder()
    }

    fn as_container(&self) -> Option<&dyn Container> {
        self.inner.as_container()
    }

    fn as_indexer<'b, 'w>(&'b self) -> Option<&'b (dyn Indexer + 'w)>
    where
        Self: 'w,
    {
        self.inner.as_indexer()
    }

    fn into_indexer<'w>(self: Box<Self>) -> Option<Box<dyn Indexer + 'w>>
    where
        Self: 'w,
    {
        Box::new(self.inner).into_indexer()
    }

    fn as_iterable<'b, 'w>(&'b self) -> Option<&'b (dyn Iterable + 'w)>
    where
        Self: 'w,
    {
        self.inner.as_iterable()
    }

    fn as_sizer(&self) -> Option<&dyn Sizer> {
        self.inner.as_sizer()
    }

    fn as_zeroer(&self) -> Option<&dyn Zeroer> {
        self.inner.as_zeroer()
    }

    /// Equal sizes, and every item of `other` matches one of these: by value
    /// for a set, by key and then value for a map list.
    fn equals(&self, other: &dyn Val) -> bool {
        if other.get_type().kind() != Kind::List {
            return false;
        }
        let Some(iterable) = other.as_iterable() else {
            return false;
        };
        let mut theirs = Vec::new();
        let mut iter = iterable.iter();
        while let Some(item) = iter.next() {
            theirs.push(item);
        }
        let mine: Vec<&dyn Val> = self.inner.inner().iter().map(|b| b.as_ref()).collect();
        if mine.len() != theirs.len() {
            return false;
        }
        theirs.iter().all(|b| {
            if self.keys.is_empty() {
                mine.iter().any(|a| a.equals(*b))
            } else {
                mine.iter()
                    .find(|a| self.same_keys(**a, *b))
                    .is_some_and(|a| a.equals(*b))
            }
        })
    }

    fn clone_as_boxed<'w>(&self) -> Box<dyn Val + 'w>
    where
        Self: 'w,
    {
        Box::new(self.clone())
    }

    fn as_builtin<'b, 'w>(&'b self) -> BuiltinRef<'b, 'w>
    where
        Self: 'w,
    {
        BuiltinRef::List(&self.inner)
    }

    fn into_builtin<'w>(self: Box<Self>) -> Option<Builtin<'w>>
    where
        Self: 'w,
    {
        Some(Builtin::List(self.inner))
    }
}

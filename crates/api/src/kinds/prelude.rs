//! What kind modules use: the shared rules they call and the types of their hooks.

pub(crate) use chrono::{DateTime, Utc};
pub(crate) use serde_json::{json, Map, Value};

pub(crate) use crate::defaults::*;
pub(crate) use crate::kinds::strategy::{Admission, Strategy};
pub(crate) use crate::schema::roundtrip;
pub(crate) use crate::schema::zero_values::*;
pub(crate) use crate::status::Cause;
pub(crate) use crate::table::format::*;
pub(crate) use crate::table::rows::*;
pub(crate) use crate::table::storage_quota::*;
pub(crate) use crate::table::workloads::*;
pub(crate) use crate::table::*;
pub(crate) use crate::validation::admission::*;
pub(crate) use crate::validation::rbac::*;
pub(crate) use crate::validation::storage::*;
pub(crate) use crate::validation::*;

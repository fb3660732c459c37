//! Amounts by quota resource name, exact (thousandths in an `i128`, so a 10,000-pod
//! namespace's memory cannot overflow), and printed as `Quantity.String()` prints them.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use cairn_apimachinery::quantity::{print_nanos, Format};

use crate::quantity::{self, QuantityError};

/// What an object uses, a quota allows (`hard`) or a namespace has used (`used`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Usage(BTreeMap<String, i128>);

impl Usage {
    /// Reads a resource list (`spec.hard`, `status.used`).
    pub fn parse(list: &BTreeMap<String, Quantity>) -> Result<Usage, QuantityError> {
        let mut u = Usage::default();
        for (name, q) in list {
            u.0.insert(name.clone(), i128::from(quantity::milli(q)?));
        }
        Ok(u)
    }

    /// `amount` is in thousandths (1000 = one pod, one core, one byte).
    pub fn set(&mut self, name: &str, milli: i128) {
        self.0.insert(name.to_string(), milli);
    }

    pub fn add_to(&mut self, name: &str, milli: i128) {
        *self.0.entry(name.to_string()).or_default() += milli;
    }

    /// Whole units (a count of one object: `units(1)`).
    pub fn add_units(&mut self, name: &str, units: i64) {
        self.add_to(name, i128::from(units) * 1000);
    }

    pub fn get(&self, name: &str) -> Option<i128> {
        self.0.get(name).copied()
    }

    pub fn contains(&self, name: &str) -> bool {
        self.0.contains_key(name)
    }

    pub fn add(&mut self, other: &Usage) {
        for (k, v) in &other.0 {
            self.add_to(k, *v);
        }
    }

    /// Subtracts, never below zero (a usage cannot be negative).
    pub fn sub(&mut self, other: &Usage) {
        for (k, v) in &other.0 {
            let e = self.0.entry(k.clone()).or_default();
            *e = (*e - v).max(0);
        }
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, i128)> {
        self.0.iter().map(|(k, v)| (k.as_str(), *v))
    }

    /// Only the resources named in `names` (a quota's hard set); missing ones count zero.
    pub fn restricted_to<'a>(&self, names: impl Iterator<Item = &'a str>) -> Usage {
        Usage(
            names
                .map(|n| (n.to_string(), self.get(n).unwrap_or(0)))
                .collect(),
        )
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// As a resource list, each amount in its canonical form.
    pub fn to_list(&self) -> BTreeMap<String, Quantity> {
        self.0
            .iter()
            .map(|(k, v)| (k.clone(), Quantity(format_amount(k, *v))))
            .collect()
    }

    /// `a=1,b=2Gi`, sorted by name (upstream `prettyPrint` of a resource list).
    pub fn pretty(&self) -> String {
        self.0
            .iter()
            .map(|(k, v)| format!("{k}={}", format_amount(k, *v)))
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// Resources whose amounts are bytes, which may print with binary suffixes.
fn is_bytes(name: &str) -> bool {
    name.contains("memory") || name.contains("storage") || name.contains("hugepages-")
}

/// An amount of `name` in thousandths as a canonical quantity: `500m`, `2`, `1k`,
/// `256Mi`, `3G`. Upstream keeps the format (binary or decimal) its operands had; sums
/// lose that here, so for byte amounts the shorter exact form wins, binary on a tie
/// (`2Gi`, not `2147483648`; `256M`, not `250000Ki`); counts and cpu are decimal.
/// Printed by the one quantity printer, `cairn-apimachinery`'s.
pub fn format_amount(name: &str, milli: i128) -> String {
    let print = |format| {
        milli
            .checked_mul(1_000_000)
            .and_then(|nanos| print_nanos(nanos, format))
            .unwrap_or_else(|| format!("{milli}m"))
    };
    let decimal = print(Format::DecimalSI);
    if !is_bytes(name) {
        return decimal;
    }
    let binary = print(Format::BinarySI);
    if binary.len() <= decimal.len() {
        binary
    } else {
        decimal
    }
}

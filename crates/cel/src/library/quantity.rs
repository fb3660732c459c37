//! `quantity()`, `isQuantity()` and the quantity methods: Kubernetes
//! resource quantities (`1.5Gi`, `100m`, `1e3`) kept as an exact decimal
//! `mantissa × 10^exponent`.

use super::{fail, opaque_val};
use cairn_apimachinery::quantity as grammar;
use cel::common::types::{CelBool, CelDouble, CelInt, CelString};
use cel::{DeclarationError, Env, ExecutionError};
use std::cmp::Ordering;

#[derive(Clone, Debug)]
pub(crate) struct Quantity {
    mantissa: i128,
    exponent: i32,
}
opaque_val!(Quantity, QUANTITY_TYPE, "kubernetes.Quantity");

impl PartialEq for Quantity {
    fn eq(&self, other: &Self) -> bool {
        self.compare(other) == Ordering::Equal
    }
}

pub(super) fn register(env: &mut Env) -> Result<(), DeclarationError> {
    cel::add_overload!(env, fn string_to_quantity: (CelString) -> Result<Quantity>, name = "quantity", id = "string_to_quantity")?;
    cel::add_overload!(env, fn is_quantity: (CelString) -> CelBool, name = "isQuantity", id = "is_quantity_string")?;
    cel::add_member_overload!(env, fn sign: (Quantity) -> CelInt, id = "quantity_get_sign")?;
    cel::add_member_overload!(env, fn is_integer: (Quantity) -> CelBool, id = "quantity_is_integer")?;
    cel::add_member_overload!(env, fn as_integer: (Quantity) -> Result<CelInt>, id = "quantity_get_value")?;
    cel::add_member_overload!(env, fn as_approximate_float: (Quantity) -> CelDouble, id = "quantity_get_float")?;
    cel::add_member_overload!(env, fn is_greater_than: (Quantity, Quantity) -> CelBool, id = "quantity_is_greater_than")?;
    cel::add_member_overload!(env, fn is_less_than: (Quantity, Quantity) -> CelBool, id = "quantity_is_less_than")?;
    cel::add_member_overload!(env, fn compare_to: (Quantity, Quantity) -> CelInt, id = "quantity_compare_to")?;
    cel::add_member_overload!(env, fn add: (Quantity, Quantity) -> Result<Quantity>, id = "quantity_add")?;
    cel::add_member_overload!(env, fn add_int: (Quantity, CelInt) -> Result<Quantity>, name = "add", id = "quantity_add_int")?;
    cel::add_member_overload!(env, fn sub: (Quantity, Quantity) -> Result<Quantity>, id = "quantity_sub")?;
    cel::add_member_overload!(env, fn sub_int: (Quantity, CelInt) -> Result<Quantity>, name = "sub", id = "quantity_sub_int")?;
    Ok(())
}

/// `resource.ParseQuantity`, read by the one quantity parser (`cairn-apimachinery`), kept
/// as the exact decimal it stands for.
pub(crate) fn parse(raw: &str) -> Result<Quantity, grammar::QuantityError> {
    let (mantissa, exponent) = grammar::parse(raw)?
        .decimal()
        .ok_or(grammar::QuantityError::FormatWrong)?;
    Ok(Quantity { mantissa, exponent })
}

impl Quantity {
    /// Both mantissas scaled to the smaller exponent, if that fits.
    fn aligned(&self, other: &Quantity) -> Option<(i128, i128, i32)> {
        let exponent = self.exponent.min(other.exponent);
        let scale = |q: &Quantity| {
            let shift = u32::try_from(q.exponent - exponent).ok()?;
            q.mantissa.checked_mul(10_i128.checked_pow(shift)?)
        };
        Some((scale(self)?, scale(other)?, exponent))
    }

    fn to_f64(&self) -> f64 {
        self.mantissa as f64 * 10f64.powi(self.exponent)
    }

    fn compare(&self, other: &Quantity) -> Ordering {
        match self.aligned(other) {
            Some((a, b, _)) => a.cmp(&b),
            None => self
                .to_f64()
                .partial_cmp(&other.to_f64())
                .unwrap_or(Ordering::Equal),
        }
    }

    fn to_i64(&self) -> Option<i64> {
        let value = if self.exponent >= 0 {
            self.mantissa
                .checked_mul(10_i128.checked_pow(self.exponent as u32)?)?
        } else {
            let divisor = 10_i128.checked_pow(self.exponent.unsigned_abs())?;
            if self.mantissa % divisor != 0 {
                return None;
            }
            self.mantissa / divisor
        };
        i64::try_from(value).ok()
    }

    fn plus(&self, other: &Quantity, function: &str) -> Result<Quantity, ExecutionError> {
        let sum = self.aligned(other).and_then(|(a, b, exponent)| {
            Some(Quantity {
                mantissa: a.checked_add(b)?,
                exponent,
            })
        });
        sum.ok_or_else(|| fail(function, "quantity overflow"))
    }
}

fn string_to_quantity(s: &CelString<'_>) -> Result<Quantity, ExecutionError> {
    parse(s.inner()).map_err(|e| fail("quantity", e.to_string()))
}

fn is_quantity(s: &CelString<'_>) -> CelBool {
    parse(s.inner()).is_ok().into()
}

fn sign(q: &Quantity) -> CelInt {
    (q.mantissa.signum() as i64).into()
}

fn is_integer(q: &Quantity) -> CelBool {
    q.to_i64().is_some().into()
}

fn as_integer(q: &Quantity) -> Result<CelInt, ExecutionError> {
    q.to_i64()
        .map(CelInt::from)
        .ok_or_else(|| fail("asInteger", "cannot convert value to integer"))
}

fn as_approximate_float(q: &Quantity) -> CelDouble {
    q.to_f64().into()
}

fn is_greater_than(q: &Quantity, other: &Quantity) -> CelBool {
    (q.compare(other) == Ordering::Greater).into()
}

fn is_less_than(q: &Quantity, other: &Quantity) -> CelBool {
    (q.compare(other) == Ordering::Less).into()
}

fn compare_to(q: &Quantity, other: &Quantity) -> CelInt {
    (q.compare(other) as i64).into()
}

fn add(q: &Quantity, other: &Quantity) -> Result<Quantity, ExecutionError> {
    q.plus(other, "add")
}

fn add_int(q: &Quantity, i: &CelInt) -> Result<Quantity, ExecutionError> {
    q.plus(
        &Quantity {
            mantissa: i128::from(*i.inner()),
            exponent: 0,
        },
        "add",
    )
}

fn sub(q: &Quantity, other: &Quantity) -> Result<Quantity, ExecutionError> {
    q.plus(
        &Quantity {
            mantissa: -other.mantissa,
            exponent: other.exponent,
        },
        "sub",
    )
}

fn sub_int(q: &Quantity, i: &CelInt) -> Result<Quantity, ExecutionError> {
    q.plus(
        &Quantity {
            mantissa: -i128::from(*i.inner()),
            exponent: 0,
        },
        "sub",
    )
}

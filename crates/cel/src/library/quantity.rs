//! `quantity()`, `isQuantity()` and the quantity methods: Kubernetes
//! resource quantities (`1.5Gi`, `100m`, `1e3`) kept as an exact decimal
//! `mantissa × 10^exponent`.

use super::{fail, opaque_val};
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

const FORMAT_WRONG: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";

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

/// `resource.ParseQuantity`'s grammar: sign, digits with at most one `.`,
/// then a binary (`Ki`..`Ei`), decimal (`n`..`E`) or exponent (`e3`) suffix.
pub(crate) fn parse(raw: &str) -> Result<Quantity, String> {
    let (negative, rest) = match raw.as_bytes().first() {
        Some(b'-') => (true, &raw[1..]),
        Some(b'+') => (false, &raw[1..]),
        _ => (false, raw),
    };
    let number_len = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let (number, suffix) = rest.split_at(number_len);
    let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && frac.is_empty() || frac.contains('.') {
        return Err(FORMAT_WRONG.into());
    }
    let digits = format!("{whole}{frac}");
    let significant = digits.trim_start_matches('0');
    let mut mantissa: i128 = if significant.is_empty() {
        0
    } else {
        significant.parse().map_err(|_| FORMAT_WRONG.to_owned())?
    };
    let mut exponent = -(frac.len() as i32);
    let (binary, decimal) = suffix_value(suffix)?;
    mantissa = mantissa
        .checked_mul(1024_i128.pow(binary))
        .ok_or(FORMAT_WRONG)?;
    exponent += decimal;
    if negative {
        mantissa = -mantissa;
    }
    Ok(Quantity { mantissa, exponent })
}

/// The suffix as a power of 1024 and a power of ten.
fn suffix_value(suffix: &str) -> Result<(u32, i32), String> {
    let binary = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
    if let Some(k) = binary.iter().position(|s| *s == suffix) {
        return Ok((k as u32, 0));
    }
    let decimal = match suffix {
        "n" => Some(-9),
        "u" => Some(-6),
        "m" => Some(-3),
        "k" => Some(3),
        "M" => Some(6),
        "G" => Some(9),
        "T" => Some(12),
        "P" => Some(15),
        "E" => Some(18),
        _ => None,
    };
    if let Some(e) = decimal {
        return Ok((0, e));
    }
    let exponent = suffix.strip_prefix(['e', 'E']).ok_or(FORMAT_WRONG)?;
    let valid = !exponent.is_empty()
        && exponent
            .trim_start_matches(['+', '-'])
            .bytes()
            .all(|b| b.is_ascii_digit());
    match exponent.parse::<i32>() {
        Ok(e) if valid => Ok((0, e)),
        _ => Err(FORMAT_WRONG.into()),
    }
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
    parse(s.inner()).map_err(|e| fail("quantity", e))
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

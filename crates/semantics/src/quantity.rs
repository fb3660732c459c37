//! Resource quantities (`500m`, `64Mi`, `1e3`, `2`) as exact integers, rounded up as
//! Kubernetes' `Quantity.MilliValue()` and `Quantity.Value()` do; the grammar is
//! `cairn-apimachinery`'s, the one every component reads.

use cairn_apimachinery::quantity::{self as grammar};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// A quantity that does not parse, named with the grammar's reason in upstream's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("quantity {value:?}: {reason}")]
pub struct QuantityError {
    pub value: String,
    pub reason: grammar::QuantityError,
}

/// The quantity in thousandths of its unit (millicores for cpu), rounded up.
pub fn parse_milli(q: &str) -> Result<i64, QuantityError> {
    scaled(q, 3)
}

/// The quantity in whole units (bytes for memory), rounded up.
pub fn parse_value(q: &str) -> Result<i64, QuantityError> {
    scaled(q, 0)
}

/// [`parse_milli`] of a k8s-openapi quantity.
pub fn milli(q: &Quantity) -> Result<i64, QuantityError> {
    parse_milli(&q.0)
}

/// [`parse_value`] of a k8s-openapi quantity.
pub fn value(q: &Quantity) -> Result<i64, QuantityError> {
    parse_value(&q.0)
}

/// A milli-unit amount as `Quantity.String()` prints `NewMilliQuantity(m, DecimalSI)`:
/// `250m`, `2`, `64k`.
pub fn print_milli(m: i64) -> String {
    grammar::print_nanos(i128::from(m) * 1_000_000, grammar::Format::DecimalSI)
        .unwrap_or_else(|| format!("{m}m"))
}

/// A whole amount as `Quantity.String()` prints `NewQuantity(v, BinarySI)`: `64Mi`,
/// `52344Ki`, `1000`, `-4Ki`.
pub fn print_binary(v: i64) -> String {
    grammar::print_nanos(i128::from(v) * 1_000_000_000, grammar::Format::BinarySI)
        .unwrap_or_else(|| v.to_string())
}

/// `Quantity.String()`: the canonical form (`4096Ki` prints `4Mi`); a malformed one as
/// written.
pub fn canonical(q: &Quantity) -> String {
    grammar::canonical(&q.0).unwrap_or_else(|_| q.0.clone())
}

/// A whole amount as `Quantity.String()` prints it in `like`'s format, as Go's
/// `Quantity.Add` keeps the receiver's: a sum of `2Mi` limits prints `4Mi`, of `2M` ones
/// `4M`.
pub fn print_like(v: i64, like: &Quantity) -> String {
    let format = grammar::parse(&like.0).map_or(grammar::Format::BinarySI, |p| p.format());
    grammar::print_nanos(i128::from(v) * 1_000_000_000, format).unwrap_or_else(|| v.to_string())
}

/// `q × 10^extra_exp`, rounded towards +∞, saturating at i64's range.
fn scaled(q: &str, extra_exp: i32) -> Result<i64, QuantityError> {
    grammar::parse(q)
        .map(|parsed| parsed.scaled_ceil(extra_exp))
        .map_err(|reason| QuantityError {
            value: q.to_string(),
            reason,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn milli_amounts_print_as_go_prints_them() {
        assert_eq!(print_milli(250), "250m");
        assert_eq!(print_milli(2000), "2");
        assert_eq!(print_milli(67_108_864_000), "67108864");
        assert_eq!(print_milli(0), "0");
        assert_eq!(print_binary(64 << 20), "64Mi");
        assert_eq!(print_binary(52_344 * 1024), "52344Ki");
        assert_eq!(print_binary(1000), "1k", "below 1024 Go prints DecimalSI");
        assert_eq!(print_binary(1500), "1500");
        assert_eq!(print_binary(-4096), "-4Ki");
        assert_eq!(print_like(4 << 20, &Quantity("2Mi".into())), "4Mi");
        assert_eq!(print_like(4_000_000, &Quantity("2M".into())), "4M");
        assert_eq!(print_like(4 << 20, &Quantity("1024Ki".into())), "4Mi");
    }

    #[test]
    fn milli_values_round_up() {
        assert_eq!(parse_milli("500m"), Ok(500));
        assert_eq!(parse_milli("2"), Ok(2000));
        assert_eq!(parse_milli("0.1"), Ok(100));
        assert_eq!(parse_milli("1.0001"), Ok(1001));
        assert_eq!(parse_milli("100u"), Ok(1));
        assert_eq!(parse_milli("1k"), Ok(1_000_000));
        assert_eq!(parse_milli("-1.5"), Ok(-1500));
    }

    #[test]
    fn values_with_suffixes() {
        assert_eq!(parse_value("64Mi"), Ok(64 << 20));
        assert_eq!(parse_value("1G"), Ok(1_000_000_000));
        assert_eq!(parse_value("1e3"), Ok(1000));
        assert_eq!(parse_value("1.5Gi"), Ok(1_610_612_736));
        assert_eq!(parse_value("110"), Ok(110));
        assert_eq!(parse_value("0.5"), Ok(1));
        assert_eq!(parse_value("999Ei"), Ok(i64::MAX));
    }

    #[test]
    fn malformed_quantities_are_errors() {
        for q in ["", "12Qi", "abc", "1..2", "--1", "1e"] {
            assert!(parse_value(q).is_err(), "{q}");
        }
        // Upstream's parseQuantityString reads "." as zero ("if we stripped all numerator
        // positions, always return 0"); cairn's own parser here used to refuse it.
        assert_eq!(parse_value("."), Ok(0));
    }
}

//! Resource quantities (`500m`, `64Mi`, `1e3`, `2`) as exact integers, rounded up as
//! Kubernetes' `Quantity.MilliValue()` and `Quantity.Value()` do.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    #[error("quantity {0:?}: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")]
    Malformed(String),
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

/// Decimal exponent and power of two a suffix stands for.
fn suffix_scale(suffix: &str) -> Option<(i32, u32)> {
    Some(match suffix {
        "" => (0, 0),
        "n" => (-9, 0),
        "u" => (-6, 0),
        "m" => (-3, 0),
        "k" => (3, 0),
        "M" => (6, 0),
        "G" => (9, 0),
        "T" => (12, 0),
        "P" => (15, 0),
        "E" => (18, 0),
        "Ki" => (0, 10),
        "Mi" => (0, 20),
        "Gi" => (0, 30),
        "Ti" => (0, 40),
        "Pi" => (0, 50),
        "Ei" => (0, 60),
        s if s.starts_with(['e', 'E']) && s.len() > 1 => (s[1..].parse().ok()?, 0),
        _ => return None,
    })
}

/// `q × 10^extra_exp`, rounded towards +∞, saturating at i64's range.
fn scaled(q: &str, extra_exp: i32) -> Result<i64, QuantityError> {
    let bad = || QuantityError::Malformed(q.to_string());
    let t = q.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+'))
        .unwrap_or(t.len());
    let (num, suffix) = t.split_at(split);
    let (negative, digits) = match num.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, num.strip_prefix('+').unwrap_or(num)),
    };
    let (int_part, frac_part) = digits.split_once('.').unwrap_or((digits, ""));
    let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if (int_part.is_empty() && frac_part.is_empty())
        || !all_digits(int_part)
        || !all_digits(frac_part)
    {
        return Err(bad());
    }
    let (dec_exp, bin_exp) = suffix_scale(suffix).ok_or_else(bad)?;
    // mantissa × 10^exp10 × 2^bin_exp, kept in i128 with saturation.
    let mut mantissa: i128 = 0;
    for b in int_part.bytes().chain(frac_part.bytes()) {
        mantissa = mantissa
            .saturating_mul(10)
            .saturating_add(i128::from(b - b'0'));
    }
    mantissa = mantissa.saturating_mul(1i128 << bin_exp.min(62));
    let exp10 = dec_exp + extra_exp - i32::try_from(frac_part.len()).map_err(|_| bad())?;
    let magnitude = if exp10 >= 0 {
        let mut m = mantissa;
        for _ in 0..exp10.min(40) {
            m = m.saturating_mul(10);
        }
        m
    } else {
        let divisor = 10i128
            .checked_pow(exp10.unsigned_abs())
            .unwrap_or(i128::MAX);
        let whole = mantissa / divisor;
        // Rounds away from zero for positives (ceil) and towards zero for negatives (ceil).
        if mantissa % divisor != 0 && !negative {
            whole + 1
        } else {
            whole
        }
    };
    let signed = if negative { -magnitude } else { magnitude };
    Ok(i64::try_from(signed).unwrap_or(if negative { i64::MIN } else { i64::MAX }))
}

#[cfg(test)]
mod tests {
    use super::*;

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
        for q in ["", "12Qi", "abc", "1..2", "--1", ".", "1e"] {
            assert!(parse_value(q).is_err(), "{q}");
        }
    }
}

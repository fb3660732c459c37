//! Resource quantities (`500m`, `1.5Gi`, `1e3`), read and printed as upstream's
//! `k8s.io/apimachinery/pkg/api/resource` does: the one grammar every cairn component
//! uses (the API server's canonical form, the scheduler's and kubelet's integer values,
//! quota sums and CEL's `quantity()`).
//!
//! [`parse`] checks a string against the grammar without arithmetic, so a valid quantity
//! too large for 128 bits still parses; each reading ([`Parsed::nanos`],
//! [`Parsed::scaled_ceil`], [`Parsed::decimal`]) says how it treats overflow.

mod print;

pub use print::{canonical, print_nanos};

/// Upstream's `ErrFormatWrong` and `ErrSuffix`, in its words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    #[error("quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")]
    FormatWrong,
    #[error("unable to parse quantity's suffix")]
    Suffix,
}

/// How a quantity prints: upstream's `resource.Format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `12e6`
    DecimalExponent,
    /// `12Mi`
    BinarySI,
    /// `12M`
    DecimalSI,
}

/// A quantity as written: sign, integer and fraction digits, and what its suffix means
/// (`digits × base^exponent`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parsed<'s> {
    positive: bool,
    num: &'s str,
    denom: &'s str,
    base: u32,
    exponent: i32,
    format: Format,
}

/// Reads `s` as upstream's `ParseQuantity` does (sign, digits, optional fraction, suffix).
pub fn parse(s: &str) -> Result<Parsed<'_>, QuantityError> {
    if s.is_empty() {
        return Err(QuantityError::FormatWrong);
    }
    let (positive, num, denom, suffix) = split(s).ok_or(QuantityError::FormatWrong)?;
    let (base, exponent, format) = interpret_suffix(suffix).ok_or(QuantityError::Suffix)?;
    Ok(Parsed {
        positive,
        num,
        denom,
        base,
        exponent,
        format,
    })
}

/// A quantity's value in nano units (`1` → 1_000_000_000, `100m` → 100_000_000), rounded
/// up below one nano as Kubernetes rounds; `None` if it does not parse or overflows.
pub fn nanos(s: &str) -> Option<i128> {
    parse(s).ok()?.nanos()
}

impl Parsed<'_> {
    pub fn format(&self) -> Format {
        self.format
    }

    pub fn is_negative(&self) -> bool {
        !self.positive
    }

    /// The value in nano units, rounded away from zero; `None` past 128 bits.
    pub fn nanos(&self) -> Option<i128> {
        let digits: i128 = format!("{}{}", self.num, self.denom).parse().ok()?;
        let denom_len = i32::try_from(self.denom.len()).ok()?;
        let (mut numer, mut divisor): (i128, i128) = (digits, 1);
        if self.base == 2 {
            numer = numer.checked_mul(1i128.checked_shl(u32::try_from(self.exponent).ok()?)?)?;
            divisor = 10i128.checked_pow(u32::try_from(denom_len).ok()?)?;
            numer = numer.checked_mul(1_000_000_000)?;
        } else {
            let e = self.exponent - denom_len + 9;
            if e >= 0 {
                numer = numer.checked_mul(10i128.checked_pow(e.unsigned_abs())?)?;
            } else {
                divisor = 10i128.checked_pow(e.unsigned_abs())?;
            }
        }
        let whole = numer / divisor;
        let n = if numer % divisor != 0 {
            whole + 1
        } else {
            whole
        };
        Some(if self.positive { n } else { -n })
    }

    /// The exact value as `mantissa × 10^exponent` (binary suffixes multiplied out);
    /// `None` past 128 bits.
    pub fn decimal(&self) -> Option<(i128, i32)> {
        let digits = format!("{}{}", self.num, self.denom);
        let mut mantissa: i128 = digits.parse().ok()?;
        let mut exponent = -i32::try_from(self.denom.len()).ok()?;
        if self.base == 2 {
            mantissa =
                mantissa.checked_mul(1i128.checked_shl(u32::try_from(self.exponent).ok()?)?)?;
        } else {
            exponent = exponent.checked_add(self.exponent)?;
        }
        Some((if self.positive { mantissa } else { -mantissa }, exponent))
    }

    /// `value × 10^extra_exp`, rounded towards +∞ and saturating at i64's range: upstream's
    /// `ScaledValue` (`extra_exp` 3 is `MilliValue`, 0 is `Value`).
    pub fn scaled_ceil(&self, extra_exp: i32) -> i64 {
        let mut mantissa: i128 = 0;
        for b in self.num.bytes().chain(self.denom.bytes()) {
            mantissa = mantissa
                .saturating_mul(10)
                .saturating_add(i128::from(b - b'0'));
        }
        let mut exp10 =
            extra_exp.saturating_sub(i32::try_from(self.denom.len()).unwrap_or(i32::MAX));
        if self.base == 2 {
            mantissa = mantissa.saturating_mul(1i128 << self.exponent.clamp(0, 62));
        } else {
            exp10 = exp10.saturating_add(self.exponent);
        }
        let magnitude = if exp10 >= 0 {
            (0..exp10.min(40)).fold(mantissa, |m, _| m.saturating_mul(10))
        } else {
            let divisor = 10i128
                .checked_pow(exp10.unsigned_abs())
                .unwrap_or(i128::MAX);
            let whole = mantissa / divisor;
            // Towards +∞: up for positives, towards zero for negatives.
            if mantissa % divisor != 0 && self.positive {
                whole + 1
            } else {
                whole
            }
        };
        let signed = if self.positive { magnitude } else { -magnitude };
        i64::try_from(signed).unwrap_or(if self.positive { i64::MAX } else { i64::MIN })
    }
}

/// Upstream's `parseQuantityString`: sign, digits (leading zeros dropped), optional
/// fraction, then the suffix characters. `None` when characters are left over.
fn split(s: &str) -> Option<(bool, &str, &str, &str)> {
    let b = s.as_bytes();
    let end = b.len();
    let mut pos = 0;
    let positive = b.first() != Some(&b'-');
    if matches!(b.first(), Some(b'-' | b'+')) {
        pos += 1;
    }
    while pos < end && b[pos] == b'0' {
        pos += 1;
    }
    if pos >= end {
        return Some((positive, "0", "", ""));
    }
    let digits_from =
        |from: usize| from + b[from..].iter().take_while(|c| c.is_ascii_digit()).count();
    let num_end = digits_from(pos);
    let num = if num_end == pos {
        "0"
    } else {
        &s[pos..num_end]
    };
    pos = num_end;
    let mut denom = "";
    if pos < end && b[pos] == b'.' {
        let denom_end = digits_from(pos + 1);
        denom = &s[pos + 1..denom_end];
        pos = denom_end;
    }
    let suffix_start = pos;
    while pos < end && b"eEinumkKMGTP".contains(&b[pos]) {
        pos += 1;
    }
    if pos < end && (b[pos] == b'-' || b[pos] == b'+') {
        pos += 1;
    }
    pos = digits_from(pos);
    (pos == end).then(|| (positive, num, denom, &s[suffix_start..end]))
}

/// Base, exponent and format of a suffix, as upstream's `suffixHandler.interpret`.
fn interpret_suffix(suffix: &str) -> Option<(u32, i32, Format)> {
    let dec = |e| Some((10, e, Format::DecimalSI));
    let bin = |e| Some((2, e, Format::BinarySI));
    match suffix {
        "" => dec(0),
        "n" => dec(-9),
        "u" => dec(-6),
        "m" => dec(-3),
        "k" => dec(3),
        "M" => dec(6),
        "G" => dec(9),
        "T" => dec(12),
        "P" => dec(15),
        "E" => dec(18),
        "Ki" => bin(10),
        "Mi" => bin(20),
        "Gi" => bin(30),
        "Ti" => bin(40),
        "Pi" => bin(50),
        "Ei" => bin(60),
        _ => {
            let rest = suffix.strip_prefix(['e', 'E'])?;
            let e: i32 = rest.parse().ok()?;
            Some((10, e, Format::DecimalExponent))
        }
    }
}

#[cfg(test)]
mod tests;

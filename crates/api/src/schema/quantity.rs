//! Quantities as the API server reads them: parsing, the canonical form Kubernetes
//! writes back, and their value in nano-units.

const QUANTITY_FORMAT_ERROR: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum QFormat {
    DecimalExponent,
    BinarySI,
    DecimalSI,
}

/// Parse a quantity and print it as Kubernetes' `Quantity.String()` does: `0.5` → `500m`,
/// `1.5Gi` → `1536Mi`, `1000` → `1k`, `1e3` stays `1e3`; values below one nano round up.
/// Strings already in canonical form are kept byte for byte, as Go keeps them. Errors carry
/// Kubernetes' message. Values too large for 128-bit arithmetic are returned unchanged.
pub fn canonical_quantity(s: &str) -> Result<String, String> {
    if s.is_empty() {
        return Err(QUANTITY_FORMAT_ERROR.to_string());
    }
    let parsed = parse_quantity_string(s).ok_or_else(|| QUANTITY_FORMAT_ERROR.to_string())?;
    let (base, exponent, format) = interpret_suffix(parsed.suffix)
        .ok_or_else(|| "unable to parse quantity's suffix".to_string())?;
    if kept_as_written(&parsed, exponent, format) {
        return Ok(s.to_string());
    }
    // Exact value in nano units, rounded away from zero (Go rounds up to the nano scale).
    let digits: i128 = match format!("{}{}", parsed.num, parsed.denom).parse::<i128>() {
        Ok(d) => d,
        Err(_) => return Ok(s.to_string()),
    };
    let Some(nanos) = to_nanos(digits, base, exponent, parsed.denom.len() as i32) else {
        return Ok(s.to_string());
    };
    let nanos = if parsed.positive { nanos } else { -nanos };
    Ok(print_nanos(nanos, format).unwrap_or_else(|| s.to_string()))
}

/// Go's fast path: a string already in canonical form is kept as written.
fn kept_as_written(parsed: &ParsedQuantity<'_>, exponent: i32, format: QFormat) -> bool {
    let (num, denom) = (parsed.num, parsed.denom);
    let precision: i32 = match format {
        QFormat::DecimalExponent | QFormat::DecimalSI => 18 - (num.len() + denom.len()) as i32,
        QFormat::BinarySI if exponent >= 0 && denom.is_empty() => {
            15 - num.len() as i32 - ((exponent as f32) * 3.0 / 10.0) as i32 - 1
        }
        QFormat::BinarySI => -1,
    };
    if precision < 0 {
        return false;
    }
    let scale = if format == QFormat::BinarySI {
        0
    } else {
        exponent
    } - denom.len() as i32;
    if scale < -9 {
        return false;
    }
    let shifted = format!("{num}{denom}");
    let Ok(value) = shifted.parse::<i64>() else {
        return false;
    };
    let mantissa: i64 = if format == QFormat::BinarySI {
        1i64.checked_shl(exponent as u32).unwrap_or(0)
    } else {
        1
    };
    if value.checked_mul(mantissa).is_none() {
        return false;
    }
    match format {
        QFormat::BinarySI => exponent % 10 == 0 && (value & 0x07) != 0,
        _ => scale % 3 == 0 && !shifted.ends_with("000") && !shifted.starts_with('0'),
    }
}

/// `Quantity.String()` of a value in nano units: a binary suffix when the value is a whole
/// multiple of 1024 (and at least 1024) in BinarySI, else the largest decimal suffix (or
/// exponent) that keeps it an integer. None when no suffix fits.
fn print_nanos(nanos: i128, mut format: QFormat) -> Option<String> {
    if nanos == 0 {
        return Some("0".to_string());
    }
    if format == QFormat::BinarySI && nanos.abs() < 1_000_000_000 {
        format = QFormat::DecimalSI;
    }
    if format == QFormat::BinarySI {
        let whole = nanos / 1_000_000_000;
        let exact = nanos % 1_000_000_000 == 0;
        if exact && !(-1024 < whole && whole < 1024) {
            return print_binary(whole);
        }
        format = QFormat::DecimalSI;
    }
    let mut amount = nanos;
    let mut exp: i32 = -9;
    while amount.abs() >= 10 && amount % 10 == 0 {
        amount /= 10;
        exp += 1;
    }
    match exp.rem_euclid(3) {
        1 => {
            amount *= 10;
            exp -= 1;
        }
        2 => {
            amount *= 100;
            exp -= 2;
        }
        _ => {}
    }
    let suffix = match format {
        QFormat::DecimalExponent if exp == 0 => String::new(),
        QFormat::DecimalExponent => format!("e{exp}"),
        _ => decimal_suffix(exp)?.to_string(),
    };
    Some(format!("{amount}{suffix}"))
}

fn print_binary(whole: i128) -> Option<String> {
    let mut amount = whole;
    let mut times = 0;
    while amount.abs() >= 1024 && amount % 1024 == 0 {
        amount /= 1024;
        times += 1;
    }
    let suffix = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"].get(times)?;
    Some(format!("{amount}{suffix}"))
}

fn decimal_suffix(exp: i32) -> Option<&'static str> {
    Some(match exp {
        -9 => "n",
        -6 => "u",
        -3 => "m",
        0 => "",
        3 => "k",
        6 => "M",
        9 => "G",
        12 => "T",
        15 => "P",
        18 => "E",
        _ => return None,
    })
}

/// A quantity's value in nano units (`1` → 1_000_000_000, `100m` → 100_000_000), rounded up
/// below one nano as Kubernetes rounds; `None` if it does not parse or overflows.
pub fn quantity_nanos(s: &str) -> Option<i128> {
    let s = s.trim();
    if s.is_empty() {
        return None;
    }
    let parsed = parse_quantity_string(s)?;
    let (base, exponent, _) = interpret_suffix(parsed.suffix)?;
    let digits: i128 = format!("{}{}", parsed.num, parsed.denom).parse().ok()?;
    let n = to_nanos(
        digits,
        base,
        exponent,
        i32::try_from(parsed.denom.len()).ok()?,
    )?;
    Some(if parsed.positive { n } else { -n })
}

/// `digits × base^exponent / 10^denom_len` in nano units, rounded away from zero.
fn to_nanos(digits: i128, base: u32, exponent: i32, denom_len: i32) -> Option<i128> {
    let (mut numer, mut denom): (i128, i128) = (digits, 1);
    if base == 2 {
        numer = numer.checked_mul(1i128.checked_shl(u32::try_from(exponent).ok()?)?)?;
        denom = 10i128.checked_pow(u32::try_from(denom_len).ok()?)?;
        numer = numer.checked_mul(1_000_000_000)?;
    } else {
        let e = exponent - denom_len + 9;
        if e >= 0 {
            numer = numer.checked_mul(10i128.checked_pow(e as u32)?)?;
        } else {
            denom = 10i128.checked_pow((-e) as u32)?;
        }
    }
    let q = numer / denom;
    Some(if numer % denom != 0 { q + 1 } else { q })
}

struct ParsedQuantity<'s> {
    positive: bool,
    num: &'s str,
    denom: &'s str,
    suffix: &'s str,
}

/// Go's `parseQuantityString`: sign, digits, optional fraction, suffix.
fn parse_quantity_string(s: &str) -> Option<ParsedQuantity<'_>> {
    let b = s.as_bytes();
    let end = b.len();
    let mut pos = 0;
    let mut positive = true;
    if let Some(&c) = b.first() {
        if c == b'-' {
            positive = false;
            pos += 1;
        } else if c == b'+' {
            pos += 1;
        }
    }
    // Leading zeros.
    while pos < end && b[pos] == b'0' {
        pos += 1;
    }
    if pos >= end {
        return Some(ParsedQuantity {
            positive,
            num: "0",
            denom: "",
            suffix: "",
        });
    }
    let num_start = pos;
    while pos < end && b[pos].is_ascii_digit() {
        pos += 1;
    }
    let mut num = &s[num_start..pos];
    if num.is_empty() {
        num = "0";
    }
    let mut denom = "";
    if pos < end && b[pos] == b'.' {
        pos += 1;
        let d_start = pos;
        while pos < end && b[pos].is_ascii_digit() {
            pos += 1;
        }
        denom = &s[d_start..pos];
    }
    let suffix_start = pos;
    while pos < end && b"eEinumkKMGTP".contains(&b[pos]) {
        pos += 1;
    }
    if pos < end && (b[pos] == b'-' || b[pos] == b'+') {
        pos += 1;
    }
    while pos < end && b[pos].is_ascii_digit() {
        pos += 1;
    }
    if pos != end {
        return None;
    }
    Some(ParsedQuantity {
        positive,
        num,
        denom,
        suffix: &s[suffix_start..end],
    })
}

/// Base, exponent and format of a quantity suffix, as Go's `suffixHandler.interpret`.
fn interpret_suffix(suffix: &str) -> Option<(u32, i32, QFormat)> {
    let dec = |e| Some((10, e, QFormat::DecimalSI));
    let bin = |e| Some((2, e, QFormat::BinarySI));
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
            Some((10, e, QFormat::DecimalExponent))
        }
    }
}

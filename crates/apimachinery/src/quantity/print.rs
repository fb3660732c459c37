//! Printing quantities as upstream's `Quantity.String()` does.

use super::{parse, Format, Parsed, QuantityError};

/// Parse a quantity and print it as Kubernetes' `Quantity.String()` does: `0.5` → `500m`,
/// `1.5Gi` → `1536Mi`, `1000` → `1k`, `1e3` stays `1e3`; values below one nano round up.
/// Strings already in canonical form are kept byte for byte, as Go keeps them. Values too
/// large for 128-bit arithmetic are returned unchanged.
pub fn canonical(s: &str) -> Result<String, QuantityError> {
    let parsed = parse(s)?;
    if kept_as_written(&parsed) {
        return Ok(s.to_string());
    }
    Ok(parsed
        .nanos()
        .and_then(|nanos| print_nanos(nanos, parsed.format))
        .unwrap_or_else(|| s.to_string()))
}

/// Go's fast path: a string already in canonical form is kept as written.
fn kept_as_written(parsed: &Parsed<'_>) -> bool {
    let (num, denom, exponent, format) = (parsed.num, parsed.denom, parsed.exponent, parsed.format);
    let precision: i32 = match format {
        Format::DecimalExponent | Format::DecimalSI => 18 - (num.len() + denom.len()) as i32,
        Format::BinarySI if exponent >= 0 && denom.is_empty() => {
            15 - num.len() as i32 - ((exponent as f32) * 3.0 / 10.0) as i32 - 1
        }
        Format::BinarySI => -1,
    };
    if precision < 0 {
        return false;
    }
    let scale = if format == Format::BinarySI {
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
    let mantissa: i64 = if format == Format::BinarySI {
        1i64.checked_shl(exponent as u32).unwrap_or(0)
    } else {
        1
    };
    if value.checked_mul(mantissa).is_none() {
        return false;
    }
    match format {
        Format::BinarySI => exponent % 10 == 0 && (value & 0x07) != 0,
        _ => scale % 3 == 0 && !shifted.ends_with("000") && !shifted.starts_with('0'),
    }
}

/// `Quantity.String()` of a value in nano units: a binary suffix when the value is a whole
/// multiple of 1024 (and at least 1024) in BinarySI, else the largest decimal suffix (or
/// exponent) that keeps it an integer. None when no suffix fits.
pub fn print_nanos(nanos: i128, mut format: Format) -> Option<String> {
    if nanos == 0 {
        return Some("0".to_string());
    }
    if format == Format::BinarySI {
        let whole = nanos / 1_000_000_000;
        let exact = nanos % 1_000_000_000 == 0;
        if exact && !(-1024 < whole && whole < 1024) {
            return print_binary(whole);
        }
        format = Format::DecimalSI;
    }
    let mut amount = nanos;
    let mut exp: i32 = -9;
    while amount.abs() >= 10 && amount % 10 == 0 {
        amount /= 10;
        exp += 1;
    }
    let pad = exp.rem_euclid(3);
    amount *= 10i128.pow(pad.unsigned_abs());
    exp -= pad;
    let suffix = match format {
        Format::DecimalExponent if exp == 0 => String::new(),
        Format::DecimalExponent => format!("e{exp}"),
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

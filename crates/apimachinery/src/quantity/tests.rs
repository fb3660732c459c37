use super::*;

#[test]
fn each_reading_of_one_parse() {
    let q = parse("1.5Gi").unwrap();
    assert_eq!(q.format(), Format::BinarySI);
    assert_eq!(q.nanos(), Some(1_610_612_736 * 1_000_000_000));
    assert_eq!(q.decimal(), Some((15 << 30, -1)));
    assert_eq!(q.scaled_ceil(0), 1_610_612_736);
    let q = parse("-250m").unwrap();
    assert!(q.is_negative());
    assert_eq!(q.nanos(), Some(-250_000_000));
    assert_eq!(q.decimal(), Some((-250, -3)));
    assert_eq!(q.scaled_ceil(3), -250);
    assert_eq!(q.scaled_ceil(0), 0, "towards +inf");
    assert_eq!(parse("1e3").unwrap().format(), Format::DecimalExponent);
    assert_eq!(parse("1e3").unwrap().decimal(), Some((1, 3)));
}

#[test]
fn upstream_grammar_and_errors() {
    assert_eq!(parse(""), Err(QuantityError::FormatWrong));
    assert_eq!(parse("1Qi"), Err(QuantityError::FormatWrong));
    assert_eq!(parse("1 Gi"), Err(QuantityError::FormatWrong));
    assert_eq!(parse("1kk"), Err(QuantityError::Suffix));
    assert_eq!(parse("1e"), Err(QuantityError::Suffix));
    // Upstream's parseQuantityString reads an empty integer part as zero.
    assert_eq!(nanos(".5"), Some(500_000_000));
    assert_eq!(nanos("000"), Some(0));
}

#[test]
fn overflow_is_each_reading_own() {
    let huge = parse("123456789012345678901234567890123456789012").unwrap();
    assert_eq!(huge.nanos(), None);
    assert_eq!(huge.decimal(), None);
    assert_eq!(huge.scaled_ceil(0), i64::MAX);
    assert_eq!(
        canonical("123456789012345678901234567890123456789012").unwrap(),
        "123456789012345678901234567890123456789012"
    );
}

#[test]
fn printing() {
    assert_eq!(
        print_nanos(1_500_000_000, Format::DecimalSI).unwrap(),
        "1500m"
    );
    assert_eq!(
        print_nanos((2i128 << 30) * 1_000_000_000, Format::BinarySI).unwrap(),
        "2Gi"
    );
    assert_eq!(print_nanos(10_000_000, Format::BinarySI).unwrap(), "10m");
    assert_eq!(
        print_nanos(10_000_000_000_000, Format::DecimalExponent).unwrap(),
        "10e3"
    );
    assert_eq!(canonical("1.5Gi").unwrap(), "1536Mi");
}

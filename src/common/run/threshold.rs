//! Latency thresholds on the command line: `10` (milliseconds, as bcc's `*slower` tools take
//! them), or with a unit: `500us`, `1.5ms`, `2s`, `250ns`.

/// Nanoseconds per unit suffix, longest suffixes first so `ms` is not read as `s`.
const UNITS: [(&str, f64); 6] = [
    ("ns", 1.0),
    ("us", 1e3),
    ("µs", 1e3),
    ("ms", 1e6),
    ("s", 1e9),
    ("", 1e6),
];

/// Parses a threshold into nanoseconds; `0` means every event.
pub fn parse_threshold(arg: &str) -> Result<u64, String> {
    let s = arg.trim();
    let bad = || {
        format!("'{arg}' is not a latency: give milliseconds (10, 0.5) or a number with a unit (500us, 1.5ms, 2s)")
    };
    let (number, per_unit) = UNITS
        .iter()
        .find_map(|(suffix, ns)| {
            s.strip_suffix(suffix)
                .filter(|n| !n.is_empty())
                .map(|n| (n, *ns))
        })
        .ok_or_else(bad)?;
    // Digits and one dot only: no signs, exponents, "inf" or "nan".
    if !number.chars().all(|c| c.is_ascii_digit() || c == '.')
        || number.chars().filter(|&c| c == '.').count() > 1
        || number == "."
    {
        return Err(bad());
    }
    let value: f64 = number.parse().map_err(|_| bad())?;
    let ns = (value * per_unit).round();
    if ns > u64::MAX as f64 / 2.0 {
        return Err(format!("'{arg}' is too long a latency to be useful"));
    }
    Ok(ns as u64)
}

/// `10 ms`, `500 us`, `1.5 ms`, `2 s` (for the "Tracing..." line).
pub fn describe_threshold(ns: u64) -> String {
    let (value, unit) = if ns >= 1_000_000_000 && ns % 1_000_000 == 0 {
        (ns as f64 / 1e9, "s")
    } else if ns >= 1_000_000 || ns == 0 {
        (ns as f64 / 1e6, "ms")
    } else if ns >= 1_000 {
        (ns as f64 / 1e3, "us")
    } else {
        (ns as f64, "ns")
    };
    let text = format!("{value:.3}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    format!("{text} {unit}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_numbers_are_milliseconds() {
        assert_eq!(parse_threshold("10"), Ok(10_000_000));
        assert_eq!(parse_threshold("0"), Ok(0));
        assert_eq!(parse_threshold("0.5"), Ok(500_000));
    }

    #[test]
    fn units() {
        assert_eq!(parse_threshold("500us"), Ok(500_000));
        assert_eq!(parse_threshold("500µs"), Ok(500_000));
        assert_eq!(parse_threshold("1.5ms"), Ok(1_500_000));
        assert_eq!(parse_threshold("2s"), Ok(2_000_000_000));
        assert_eq!(parse_threshold("250ns"), Ok(250));
    }

    #[test]
    fn garbage_is_refused() {
        for bad in [
            "", "ms", "-1", "+3", "1e3", "inf", "nan", "10xs", "1.2.3", ".", "10 m", "fast",
        ] {
            let err = parse_threshold(bad).unwrap_err();
            assert!(err.contains("is not a latency"), "{bad}: {err}");
        }
    }

    #[test]
    fn described_in_the_largest_whole_unit() {
        assert_eq!(describe_threshold(10_000_000), "10 ms");
        assert_eq!(describe_threshold(1_500_000), "1.5 ms");
        assert_eq!(describe_threshold(500_000), "500 us");
        assert_eq!(describe_threshold(2_000_000_000), "2 s");
        assert_eq!(describe_threshold(250), "250 ns");
    }
}

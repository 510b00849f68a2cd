//! Time without a date crate: milliseconds since the epoch, and RFC 3339 timestamps in UTC (the one
//! format Portico writes: audit records, A2A task statuses, the `system_time` tool).

use std::time::{SystemTime, UNIX_EPOCH};

/// Now, in milliseconds since the epoch.
pub fn now_ms() -> i64 {
    unix_ms(SystemTime::now())
}

/// Now, as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub fn now_rfc3339() -> String {
    rfc3339(now_ms())
}

/// Milliseconds since the epoch; negative for a clock set before 1970.
pub fn unix_ms(now: SystemTime) -> i64 {
    match now.duration_since(UNIX_EPOCH) {
        Ok(after) => i64::try_from(after.as_millis()).unwrap_or(i64::MAX),
        Err(before) => i64::try_from(before.duration().as_millis()).map_or(i64::MIN, |ms| -ms),
    }
}

/// Formats milliseconds since the epoch as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub fn rfc3339(unix_ms: i64) -> String {
    let seconds = unix_ms.div_euclid(1000);
    let millis = unix_ms.rem_euclid(1000);
    let days = seconds.div_euclid(86_400);
    let of_day = seconds.rem_euclid(86_400);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        of_day / 3600,
        of_day % 3600 / 60,
        of_day % 60
    )
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's algorithm, which
/// works in 400-year eras starting on March 1st so that leap days fall at the end of a year).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * month_from_march + 2) / 5 + 1) as u32;
    let month = if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// The day count since 1970-01-01 of a proleptic Gregorian date: the inverse of
/// [`civil_from_days`].
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year.rem_euclid(400);
    let month = i64::from(month);
    let day_of_year =
        (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5 + i64::from(day) - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// Parses an RFC 3339 timestamp (`2026-01-31T12:00:00Z`, with optional fractional seconds, and
/// `Z` or a `+hh:mm`/`-hh:mm` offset) into milliseconds since the epoch. `None` for anything else.
pub fn parse_rfc3339(text: &str) -> Option<i64> {
    let bytes = text.as_bytes();
    let digits = |from: usize, len: usize| -> Option<i64> {
        let part = text.get(from..from + len)?;
        part.bytes()
            .all(|b| b.is_ascii_digit())
            .then(|| part.parse().ok())?
    };
    if bytes.len() < 20
        || bytes[4] != b'-'
        || bytes[7] != b'-'
        || !matches!(bytes[10], b'T' | b't' | b' ')
        || bytes[13] != b':'
        || bytes[16] != b':'
    {
        return None;
    }
    let (year, month, day) = (digits(0, 4)?, digits(5, 2)?, digits(8, 2)?);
    let (hour, minute, second) = (digits(11, 2)?, digits(14, 2)?, digits(17, 2)?);
    let month = u32::try_from(month).ok().filter(|m| (1..=12).contains(m))?;
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let month_days = [
        31,
        if leap { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    let day = u32::try_from(day)
        .ok()
        .filter(|d| (1..=month_days[month as usize - 1]).contains(d))?;
    if hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let mut rest = &text[19..];
    let mut millis = 0;
    if let Some(fraction) = rest.strip_prefix('.') {
        let len = fraction.bytes().take_while(u8::is_ascii_digit).count();
        if len == 0 {
            return None;
        }
        let kept = &fraction[..len.min(3)];
        millis = kept.parse::<i64>().ok()? * 10_i64.pow(3 - kept.len() as u32);
        rest = &fraction[len..];
    }
    let offset_minutes = match rest {
        "Z" | "z" => 0,
        _ if rest.len() == 6 && rest.as_bytes()[3] == b':' => {
            let sign = match rest.as_bytes()[0] {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let offset = |from: usize| -> Option<i64> {
                let part = rest.get(from..from + 2)?;
                part.bytes()
                    .all(|b| b.is_ascii_digit())
                    .then(|| part.parse().ok())?
            };
            let (hours, minutes) = (offset(1)?, offset(4)?);
            if hours > 23 || minutes > 59 {
                return None;
            }
            sign * (hours * 60 + minutes)
        }
        _ => return None,
    };
    let seconds = days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second
        - offset_minutes * 60;
    seconds.checked_mul(1000)?.checked_add(millis)
}

/// A `--since` value neither form could read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{0}` is neither a duration back from now (90s, 15m, 2h, 7d) nor an RFC 3339 time (2026-01-31T12:00:00Z)"
)]
pub struct SinceError(pub String);

/// The instant a `since` filter names, in milliseconds since the epoch: a duration back from
/// `now_ms` (a whole number with `s`, `m`, `h` or `d`) or an RFC 3339 timestamp.
pub fn parse_since(text: &str, now_ms: i64) -> Result<i64, SinceError> {
    let text = text.trim();
    if let Some(at) = parse_rfc3339(text) {
        return Ok(at);
    }
    let unit_ms = match text.chars().last() {
        Some('s') => 1_000,
        Some('m') => 60_000,
        Some('h') => 3_600_000,
        Some('d') => 86_400_000,
        _ => return Err(SinceError(text.to_string())),
    };
    let count = &text[..text.len() - 1];
    if count.is_empty() || !count.bytes().all(|b| b.is_ascii_digit()) {
        return Err(SinceError(text.to_string()));
    }
    count
        .parse::<i64>()
        .ok()
        .and_then(|count| count.checked_mul(unit_ms))
        .map(|back| now_ms.saturating_sub(back))
        .ok_or_else(|| SinceError(text.to_string()))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn formats_known_instants() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(rfc3339(1_709_210_096_789), "2024-02-29T12:34:56.789Z");
        assert_eq!(rfc3339(1_735_689_599_999), "2024-12-31T23:59:59.999Z");
        assert_eq!(rfc3339(4_107_542_400_000), "2100-03-01T00:00:00.000Z");
        assert_eq!(rfc3339(-1), "1969-12-31T23:59:59.999Z");
        assert_eq!(unix_ms(UNIX_EPOCH + Duration::from_millis(1234)), 1234);
        assert_eq!(unix_ms(UNIX_EPOCH - Duration::from_millis(5)), -5);
    }

    #[test]
    fn parses_what_it_formats_and_common_offsets() {
        for ms in [
            0,
            951_782_400_000,
            1_709_210_096_789,
            1_735_689_599_999,
            4_107_542_400_000,
            -1,
        ] {
            assert_eq!(parse_rfc3339(&rfc3339(ms)), Some(ms), "{ms}");
        }
        assert_eq!(
            parse_rfc3339("2024-02-29T12:34:56Z"),
            Some(1_709_210_096_000)
        );
        assert_eq!(
            parse_rfc3339("2024-02-29T14:34:56.7+02:00"),
            Some(1_709_210_096_700)
        );
        assert_eq!(
            parse_rfc3339("2024-02-29T12:04:56.123456-00:30"),
            Some(1_709_210_096_123)
        );
        for bad in [
            "",
            "2024-02-30T00:00:00Z",
            "2023-02-29T00:00:00Z",
            "2024-13-01T00:00:00Z",
            "2024-01-01T24:00:00Z",
            "2024-01-01T00:00:00",
            "2024-01-01T00:00:00.Z",
            "2024-01-01T00:00:00+0200",
            "+024-01-01T00:00:00Z",
            "2024-01-01T00:00:00Zjunk",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }

    #[test]
    fn since_is_a_duration_back_from_now_or_an_instant() {
        let now = 1_000_000_000;
        assert_eq!(parse_since("90s", now), Ok(now - 90_000));
        assert_eq!(parse_since("15m", now), Ok(now - 900_000));
        assert_eq!(parse_since("2h", now), Ok(now - 7_200_000));
        assert_eq!(parse_since("7d", now), Ok(now - 604_800_000));
        assert_eq!(parse_since("1970-01-01T00:00:01Z", now), Ok(1000));
        for bad in ["", "h", "-5m", "1.5h", "10", "3w", "99999999999999999999d"] {
            let error = parse_since(bad, now).unwrap_err();
            assert_eq!(error, SinceError(bad.to_string()));
        }
        assert_eq!(
            SinceError("3w".into()).to_string(),
            "`3w` is neither a duration back from now (90s, 15m, 2h, 7d) nor an RFC 3339 time (2026-01-31T12:00:00Z)"
        );
    }
}

//! Time stamps: Unix milliseconds in, RFC 3339 out.
//!
//! A small civil-calendar conversion (Howard Hinnant's `civil_from_days`)
//! instead of a date crate: the service only ever formats UTC instants.

use std::time::{SystemTime, UNIX_EPOCH};

/// The earliest timestamp accepted: 0001-01-01T00:00:00Z, in Unix ms.
pub const MIN_TIMESTAMP_MS: i64 = -62_135_596_800_000;
/// The latest timestamp accepted: 9999-12-31T23:59:59.999Z, in Unix ms.
pub const MAX_TIMESTAMP_MS: i64 = 253_402_300_799_999;

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> i64 {
    match SystemTime::now().duration_since(UNIX_EPOCH) {
        Ok(elapsed) => i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX),
        Err(before) => -i64::try_from(before.duration().as_millis()).unwrap_or(i64::MAX),
    }
}

/// Formats Unix milliseconds as RFC 3339 UTC (`2024-01-01T00:00:00.000Z`).
/// Values outside the accepted range are clamped to it.
pub fn rfc3339_from_ms(ms: i64) -> String {
    let ms = ms.clamp(MIN_TIMESTAMP_MS, MAX_TIMESTAMP_MS);
    let days = ms.div_euclid(86_400_000);
    let ms_of_day = ms.rem_euclid(86_400_000);
    let (year, month, day) = civil_from_days(days);
    let hour = ms_of_day / 3_600_000;
    let minute = ms_of_day / 60_000 % 60;
    let second = ms_of_day / 1000 % 60;
    let millis = ms_of_day % 1000;
    format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}.{millis:03}Z")
}

fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_known_instants() {
        assert_eq!(rfc3339_from_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            rfc3339_from_ms(1_704_067_200_000),
            "2024-01-01T00:00:00.000Z"
        );
        assert_eq!(rfc3339_from_ms(951_782_400_123), "2000-02-29T00:00:00.123Z");
        assert_eq!(rfc3339_from_ms(-1), "1969-12-31T23:59:59.999Z");
        assert_eq!(
            rfc3339_from_ms(MIN_TIMESTAMP_MS),
            "0001-01-01T00:00:00.000Z"
        );
        assert_eq!(
            rfc3339_from_ms(MAX_TIMESTAMP_MS),
            "9999-12-31T23:59:59.999Z"
        );
        assert_eq!(rfc3339_from_ms(i64::MAX), "9999-12-31T23:59:59.999Z");
    }
}

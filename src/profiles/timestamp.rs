//! The creation date as the Python server writes it: `datetime.now(timezone.utc).isoformat()`,
//! without a date library for one format.

use std::time::{SystemTime, UNIX_EPOCH};

/// Now in UTC, e.g. `2026-12-03T10:42:15.123456+00:00`.
pub(super) fn now_isoformat() -> String {
    let since_epoch = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    isoformat(since_epoch.as_secs(), since_epoch.subsec_micros())
}

/// Python leaves the fraction out when the microseconds are zero, and so do we.
fn isoformat(unix_seconds: u64, micros: u32) -> String {
    let days = (unix_seconds / 86_400) as i64;
    let of_day = unix_seconds % 86_400;
    let (year, month, day) = civil_from_days(days);
    let time = format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}",
        of_day / 3600,
        of_day / 60 % 60,
        of_day % 60
    );
    if micros == 0 {
        format!("{time}+00:00")
    } else {
        format!("{time}.{micros:06}+00:00")
    }
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's
/// `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * shifted_month + 2) / 5 + 1) as u32;
    let month = if shifted_month < 10 {
        shifted_month + 3
    } else {
        shifted_month - 9
    } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Expected strings from Python:
    /// `datetime.fromtimestamp(s, timezone.utc).replace(microsecond=us).isoformat()`.
    #[test]
    fn matches_pythons_isoformat() {
        assert_eq!(isoformat(0, 0), "1970-01-01T00:00:00+00:00");
        assert_eq!(
            isoformat(1_796_294_535, 123_456),
            "2026-12-03T10:42:15.123456+00:00"
        );
        assert_eq!(
            isoformat(951_782_400, 7),
            "2000-02-29T00:00:00.000007+00:00"
        );
        assert_eq!(
            isoformat(4_107_542_399, 999_999),
            "2100-02-28T23:59:59.999999+00:00"
        );
    }
}

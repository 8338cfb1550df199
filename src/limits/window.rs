//! Fixed windows on the host's clock (UTC), aligned to the epoch and to
//! calendar months: every worker and every proxy agrees on where a window
//! starts without talking to the others.

const SECOND_MS: u64 = 1000;
const MINUTE_MS: u64 = 60 * SECOND_MS;
const HOUR_MS: u64 = 60 * MINUTE_MS;
const DAY_MS: u64 = 24 * HOUR_MS;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Window {
    Second,
    Minute,
    Hour,
    Day,
    /// A calendar month (UTC).
    Month,
}

impl Window {
    pub fn name(self) -> &'static str {
        match self {
            Self::Second => "second",
            Self::Minute => "minute",
            Self::Hour => "hour",
            Self::Day => "day",
            Self::Month => "month",
        }
    }

    /// `[start, end)` in milliseconds since the epoch of the window holding `now_ms`.
    pub fn bounds(self, now_ms: u64) -> (u64, u64) {
        let fixed = |len: u64| {
            let start = now_ms - now_ms % len;
            (start, start + len)
        };
        match self {
            Self::Second => fixed(SECOND_MS),
            Self::Minute => fixed(MINUTE_MS),
            Self::Hour => fixed(HOUR_MS),
            Self::Day => fixed(DAY_MS),
            Self::Month => {
                let (year, month, _) = civil_from_days(now_ms / DAY_MS);
                let (next_year, next_month) = if month == 12 {
                    (year + 1, 1)
                } else {
                    (year, month + 1)
                };
                (
                    days_from_civil(year, month, 1) * DAY_MS,
                    days_from_civil(next_year, next_month, 1) * DAY_MS,
                )
            }
        }
    }
}

/// (year, month 1-12, day 1-31) of a day count since 1970-01-01 (H. Hinnant's
/// algorithm, for days on or after the epoch).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

/// Days since 1970-01-01 of a date on or after it.
fn days_from_civil(year: u64, month: u64, day: u64) -> u64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year / 400;
    let yoe = year % 400;
    let mp = if month > 2 { month - 3 } else { month + 9 };
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    (era * 146_097 + doe).saturating_sub(719_468)
}

#[cfg(test)]
mod tests {
    use super::*;

    // 2026-02-14T13:45:30.250Z
    const NOW: u64 = 1_771_076_730_250;

    #[test]
    fn fixed_windows_align_to_the_epoch() {
        assert_eq!(
            Window::Second.bounds(NOW),
            (1_771_076_730_000, 1_771_076_731_000)
        );
        assert_eq!(
            Window::Minute.bounds(NOW),
            (1_771_076_700_000, 1_771_076_760_000)
        );
        assert_eq!(
            Window::Hour.bounds(NOW),
            (1_771_074_000_000, 1_771_077_600_000)
        );
        assert_eq!(
            Window::Day.bounds(NOW),
            (1_771_027_200_000, 1_771_113_600_000)
        );
        // The last millisecond of a window is in it; the next is not.
        assert_eq!(
            Window::Minute.bounds(1_771_076_759_999).0,
            1_771_076_700_000
        );
        assert_eq!(
            Window::Minute.bounds(1_771_076_760_000).0,
            1_771_076_760_000
        );
    }

    #[test]
    fn months_are_calendar_months() {
        // February 2026 (28 days), from 2026-02-01 to 2026-03-01.
        assert_eq!(
            Window::Month.bounds(NOW),
            (1_769_904_000_000, 1_772_323_200_000)
        );
        // December rolls into January of the next year.
        let dec = 1_798_675_200_000; // 2026-12-31T00:00:00Z
        assert_eq!(
            Window::Month.bounds(dec),
            (1_796_083_200_000, 1_798_761_600_000)
        );
        // A leap February has 29 days.
        let (start, end) = Window::Month.bounds(1_709_251_199_000); // 2024-02-29T23:59:59Z
        assert_eq!((end - start) / DAY_MS, 29);
    }

    #[test]
    fn civil_dates_round_trip() {
        for days in (0..80_000).step_by(37) {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
        assert_eq!(civil_from_days(0), (1970, 1, 1));
    }
}

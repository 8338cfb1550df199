//! Fixed windows on the host's clock (UTC), aligned to the epoch and to
//! calendar months: every worker and every proxy agrees on where a window
//! starts without talking to the others.

use crate::formats::date::{civil_from_days, days_from_civil};

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
    /// Any other length (milliseconds, a whole number of seconds), aligned
    /// to the epoch: `usd_per: {"amount": 50, "period": "7d"}`.
    Period(u64),
}

/// The longest period a limit may have.
const MAX_PERIOD_MS: u64 = 366 * DAY_MS;

impl Window {
    pub fn name(self) -> std::borrow::Cow<'static, str> {
        match self {
            Self::Second => "second".into(),
            Self::Minute => "minute".into(),
            Self::Hour => "hour".into(),
            Self::Day => "day".into(),
            Self::Month => "month".into(),
            Self::Period(ms) => {
                let unit = [
                    (DAY_MS, 'd'),
                    (HOUR_MS, 'h'),
                    (MINUTE_MS, 'm'),
                    (SECOND_MS, 's'),
                ]
                .into_iter()
                .find(|(len, _)| ms % len == 0);
                match unit {
                    Some((len, name)) => format!("{}{name}", ms / len).into(),
                    None => format!("{ms}ms").into(),
                }
            }
        }
    }

    /// A period as written in the configuration: a whole number and a unit,
    /// `s`, `m`, `h`, `d` or `w` (`"90s"`, `"12h"`, `"7d"`), at most 366
    /// days; one second, minute, hour or day is that fixed window.
    pub fn parse_period(text: &str) -> Result<Self, String> {
        let split = text
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(text.len());
        let (digits, unit) = text.split_at(split);
        let unit_ms = match unit {
            "s" => SECOND_MS,
            "m" => MINUTE_MS,
            "h" => HOUR_MS,
            "d" => DAY_MS,
            "w" => 7 * DAY_MS,
            _ => {
                return Err(format!(
                    "'{}' is not a period such as \"30s\", \"12h\", \"7d\" or \"2w\"",
                    text.escape_debug()
                ))
            }
        };
        let ms = digits
            .parse::<u64>()
            .ok()
            .and_then(|n| n.checked_mul(unit_ms))
            .filter(|ms| (SECOND_MS..=MAX_PERIOD_MS).contains(ms))
            .ok_or_else(|| format!("'{}': a period is 1s to 366d", text.escape_debug()))?;
        Ok(match ms {
            SECOND_MS => Self::Second,
            MINUTE_MS => Self::Minute,
            HOUR_MS => Self::Hour,
            DAY_MS => Self::Day,
            ms => Self::Period(ms),
        })
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
            Self::Period(len) => fixed(len.max(SECOND_MS)),
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
    fn periods_are_epoch_aligned_and_named_as_written() {
        let week = Window::parse_period("7d").unwrap();
        assert_eq!(week, Window::Period(7 * DAY_MS));
        assert_eq!(week.name(), "7d");
        // 2026-02-12 00:00Z (Thursday: the epoch's weekday) to the 19th.
        assert_eq!(week.bounds(NOW), (1_770_854_400_000, 1_771_459_200_000));
        assert_eq!(Window::parse_period("2w").unwrap().name(), "14d");
        assert_eq!(Window::parse_period("90s").unwrap().name(), "90s");
        assert_eq!(Window::parse_period("90m").unwrap().name(), "90m");
        assert_eq!(Window::parse_period("1h").unwrap(), Window::Hour);
        assert_eq!(Window::parse_period("24h").unwrap(), Window::Day);
        for bad in [
            "",
            "7",
            "d",
            "0d",
            "7 d",
            "1y",
            "367d",
            "-1d",
            "99999999999999999999s",
        ] {
            assert!(Window::parse_period(bad).is_err(), "{bad}");
        }
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
}

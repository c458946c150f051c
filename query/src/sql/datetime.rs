//! Date and time functions. Cosmos represents date-times as ISO 8601 UTC strings with seven
//! fractional digits (`2020-07-03T00:00:00.0000000Z`); we compute on 100 ns ticks since the Unix
//! epoch, with civil-calendar conversion (Howard Hinnant's algorithms).

use super::value::{number, Val};
use serde_json::Value;

const TICKS_PER_SEC: i64 = 10_000_000;
const TICKS_PER_DAY: i64 = 86_400 * TICKS_PER_SEC;
/// 0001-01-01 and 9999-12-31T23:59:59.9999999, the representable range.
const MIN_TICKS: i64 = -621_355_968_000_000_000;
const MAX_TICKS: i64 = 2_534_023_007_999_999_999;

pub fn now_millis() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

pub fn now_unix_ticks() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| (d.as_nanos() / 100) as i64)
        .unwrap_or(0)
}

pub fn unix_ms_to_ticks(ms: i64) -> i64 {
    ms.saturating_mul(10_000)
}

fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = if z >= 0 { z } else { z - 146_096 } / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ => {
            if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 {
                29
            } else {
                28
            }
        }
    }
}

/// Broken-down UTC date-time.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Parts {
    y: i64,
    mo: i64,
    d: i64,
    h: i64,
    mi: i64,
    s: i64,
    /// Fraction of the second in ticks (0..10^7).
    frac: i64,
}

fn to_ticks(p: Parts) -> Option<i64> {
    if !(1..=9999).contains(&p.y)
        || !(1..=12).contains(&p.mo)
        || p.d < 1
        || p.d > days_in_month(p.y, p.mo)
        || !(0..24).contains(&p.h)
        || !(0..60).contains(&p.mi)
        || !(0..60).contains(&p.s)
        || !(0..TICKS_PER_SEC).contains(&p.frac)
    {
        return None;
    }
    let days = days_from_civil(p.y, p.mo, p.d);
    Some(days * TICKS_PER_DAY + (p.h * 3600 + p.mi * 60 + p.s) * TICKS_PER_SEC + p.frac)
}

fn from_ticks(t: i64) -> Parts {
    let days = t.div_euclid(TICKS_PER_DAY);
    let rem = t.rem_euclid(TICKS_PER_DAY);
    let (y, mo, d) = civil_from_days(days);
    let secs = rem / TICKS_PER_SEC;
    Parts {
        y,
        mo,
        d,
        h: secs / 3600,
        mi: (secs / 60) % 60,
        s: secs % 60,
        frac: rem % TICKS_PER_SEC,
    }
}

/// Parses `YYYY-MM-DD[Thh:mm[:ss[.fffffff]]][Z]` into ticks since the Unix epoch.
pub fn parse(text: &str) -> Option<i64> {
    let t = text.trim();
    let t = t
        .strip_suffix('Z')
        .or_else(|| t.strip_suffix("+00:00"))
        .unwrap_or(t);
    let (date, time) = match t.split_once('T') {
        Some((d, tm)) => (d, Some(tm)),
        None => (t, None),
    };
    let num = |s: &str, len: usize| -> Option<i64> {
        (s.len() == len && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse().ok())
            .flatten()
    };
    let mut dp = date.split('-');
    let y = num(dp.next()?, 4)?;
    let mo = num(dp.next()?, 2)?;
    let d = num(dp.next()?, 2)?;
    if dp.next().is_some() {
        return None;
    }
    let (mut h, mut mi, mut s, mut frac) = (0, 0, 0, 0);
    if let Some(tm) = time {
        let (hms, f) = match tm.split_once('.') {
            Some((a, b)) => (a, Some(b)),
            None => (tm, None),
        };
        let mut tp = hms.split(':');
        h = num(tp.next()?, 2)?;
        mi = num(tp.next()?, 2)?;
        if let Some(sec) = tp.next() {
            s = num(sec, 2)?;
        }
        if tp.next().is_some() {
            return None;
        }
        if let Some(f) = f {
            if f.is_empty() || f.len() > 7 || !f.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            frac = f.parse::<i64>().ok()? * 10i64.pow(7 - f.len() as u32);
        }
    }
    to_ticks(Parts {
        y,
        mo,
        d,
        h,
        mi,
        s,
        frac,
    })
}

pub fn format_ticks(t: i64) -> String {
    let p = from_ticks(t);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:07}Z",
        p.y, p.mo, p.d, p.h, p.mi, p.s, p.frac
    )
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Part {
    Year,
    Month,
    Day,
    Hour,
    Minute,
    Second,
    Milli,
    Micro,
    Nano,
}

fn part(name: &str) -> Option<Part> {
    Some(match name.to_ascii_lowercase().as_str() {
        "year" | "yyyy" | "yy" => Part::Year,
        "month" | "mm" | "m" => Part::Month,
        "day" | "dd" | "d" => Part::Day,
        "hour" | "hh" => Part::Hour,
        "minute" | "mi" | "n" => Part::Minute,
        "second" | "ss" | "s" => Part::Second,
        "millisecond" | "ms" => Part::Milli,
        "microsecond" | "mcs" => Part::Micro,
        "nanosecond" | "ns" => Part::Nano,
        _ => return None,
    })
}

/// Ticks in one unit of a fixed-length part.
fn unit_ticks(p: Part) -> Option<i64> {
    Some(match p {
        Part::Day => TICKS_PER_DAY,
        Part::Hour => 3600 * TICKS_PER_SEC,
        Part::Minute => 60 * TICKS_PER_SEC,
        Part::Second => TICKS_PER_SEC,
        Part::Milli => 10_000,
        Part::Micro => 10,
        _ => return None,
    })
}

/// A whole-number argument: exact when given as an integer (ticks pass 2^53).
fn int(v: &Val<'_>) -> Option<i64> {
    if let Some(i) = v.get().and_then(Value::as_i64) {
        return Some(i);
    }
    let f = v.as_f64()?;
    (f.fract() == 0.0 && f.abs() < 9.2e18).then_some(f as i64)
}

fn in_range(t: i64) -> Option<i64> {
    (MIN_TICKS..=MAX_TICKS).contains(&t).then_some(t)
}

fn add_months(t: i64, months: i64) -> Option<i64> {
    let p = from_ticks(t);
    let total = p.y * 12 + (p.mo - 1) + months;
    let (y, mo) = (total.div_euclid(12), total.rem_euclid(12) + 1);
    if !(1..=9999).contains(&y) {
        return None;
    }
    to_ticks(Parts {
        y,
        mo,
        d: p.d.min(days_in_month(y, mo)),
        ..p
    })
}

/// `t` moved by `k` of the date and time part named `part` (`DATETIMEADD`'s arithmetic, and
/// `NOW`'s and `AGO`'s): `None` for an unknown part or a result out of range.
pub fn add(part_name: &str, k: i64, t: i64) -> Option<i64> {
    let r = match part(part_name)? {
        Part::Year => add_months(t, k.checked_mul(12)?)?,
        Part::Month => add_months(t, k)?,
        Part::Nano => t.checked_add(k / 100)?,
        other => t.checked_add(k.checked_mul(unit_ticks(other)?)?)?,
    };
    in_range(r)
}

/// The civil fields of `t`: year, month, day, hour, minute, second and the second's ticks.
pub fn civil(t: i64) -> [i64; 7] {
    let p = from_ticks(t);
    [p.y, p.mo, p.d, p.h, p.mi, p.s, p.frac]
}

/// [`parse`], also with a space between the date and the time (`2024-10-10 14:40:20`, as
/// `DATETIMEFORMAT` and `IS_DATETIME` take it).
pub fn parse_spaced(text: &str) -> Option<i64> {
    match text.get(10..11) {
        Some(" ") => parse(&format!("{}T{}", &text[..10], &text[11..])),
        _ => parse(text),
    }
}

/// Whether `text` is a date-time as `IS_DATETIME` defines it (its reference page's rules):
/// `YYYY-MM-DD`, then `Z`, or a space or `T` and `hh:mm:ss`, optionally `.` and one to seven
/// digits, optionally `Z` — and a real calendar date and time.
pub fn is_datetime(text: &str) -> bool {
    let b = text.as_bytes();
    let digits =
        |r: std::ops::Range<usize>| b.get(r).is_some_and(|x| x.iter().all(u8::is_ascii_digit));
    let date = b.len() >= 10
        && digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10);
    let rest = &b[10.min(b.len())..];
    let shape = date
        && match rest {
            [] | [b'Z'] => true,
            [b' ' | b'T', time @ ..] => {
                let time = time.strip_suffix(b"Z").unwrap_or(time);
                let hms = time.len() >= 8
                    && digits(11..13)
                    && time[2] == b':'
                    && digits(14..16)
                    && time[5] == b':'
                    && digits(17..19);
                hms && match &time[8..] {
                    [] => true,
                    [b'.', frac @ ..] => {
                        (1..=7).contains(&frac.len()) && frac.iter().all(u8::is_ascii_digit)
                    }
                    _ => false,
                }
            }
            _ => false,
        };
    shape && parse_spaced(text.strip_suffix('Z').unwrap_or(text)).is_some()
}

pub fn call(name: &str, a: &[Val<'_>]) -> Option<Value> {
    let str_at = |i: usize| a.get(i).and_then(|v| v.as_str());
    match name {
        "DATETIMEADD" => {
            let r = add(str_at(0)?, int(&a[1])?, parse(str_at(2)?)?)?;
            Some(Value::String(format_ticks(r)))
        }
        "DATETIMEDIFF" => {
            let p = part(str_at(0)?)?;
            let t1 = parse(str_at(1)?)?;
            let t2 = parse(str_at(2)?)?;
            let d = match p {
                Part::Year => from_ticks(t2).y - from_ticks(t1).y,
                Part::Month => {
                    let (x, y) = (from_ticks(t1), from_ticks(t2));
                    (y.y * 12 + y.mo) - (x.y * 12 + x.mo)
                }
                Part::Nano => (t2 - t1).checked_mul(100)?,
                other => {
                    let u = unit_ticks(other)?;
                    t2.div_euclid(u) - t1.div_euclid(u)
                }
            };
            Some(Value::from(d))
        }
        "DATETIMEPART" => {
            let p = part(str_at(0)?)?;
            let x = from_ticks(parse(str_at(1)?)?);
            let v = match p {
                Part::Year => x.y,
                Part::Month => x.mo,
                Part::Day => x.d,
                Part::Hour => x.h,
                Part::Minute => x.mi,
                Part::Second => x.s,
                Part::Milli => x.frac / 10_000,
                Part::Micro => x.frac / 10,
                Part::Nano => x.frac * 100,
            };
            number(v as f64)
        }
        "DATETIMEFROMPARTS" => {
            let v = |i: usize| -> Option<i64> {
                match a.get(i) {
                    Some(x) => int(x),
                    None => Some(0),
                }
            };
            let t = to_ticks(Parts {
                y: v(0)?,
                mo: v(1)?,
                d: v(2)?,
                h: v(3)?,
                mi: v(4)?,
                s: v(5)?,
                frac: v(6)?,
            })?;
            Some(Value::String(format_ticks(t)))
        }
        "DATETIMEBIN" => {
            let t = parse(str_at(0)?)?;
            let p = part(str_at(1)?)?;
            let size = match a.get(2) {
                Some(x) => int(x)?,
                None => 1,
            };
            if size <= 0 {
                return None;
            }
            let origin = match a.get(3) {
                Some(x) => parse(x.as_str()?)?,
                None => 0,
            };
            let unit = match p {
                Part::Nano => return None,
                Part::Year | Part::Month => {
                    let (x, o) = (from_ticks(t), from_ticks(origin));
                    let months = if p == Part::Year { 12 * size } else { size };
                    let diff = (x.y * 12 + x.mo) - (o.y * 12 + o.mo);
                    let bins = diff.div_euclid(months);
                    let r = add_months(origin, bins * months)?;
                    return Some(Value::String(format_ticks(r)));
                }
                other => unit_ticks(other)? * size,
            };
            let r = origin + (t - origin).div_euclid(unit) * unit;
            Some(Value::String(format_ticks(in_range(r)?)))
        }
        "DATETIMETOTICKS" => Some(Value::from(parse(str_at(0)?)?)),
        "DATETIMETOTIMESTAMP" => Some(Value::from(parse(str_at(0)?)?.div_euclid(10_000))),
        "TICKSTODATETIME" => {
            let t = int(&a[0])?;
            Some(Value::String(format_ticks(in_range(t)?)))
        }
        "TIMESTAMPTODATETIME" => {
            let ms = int(&a[0])?;
            Some(Value::String(format_ticks(in_range(
                ms.checked_mul(10_000)?,
            )?)))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Val<'static> {
        Val::Own(Value::String(s.into()))
    }

    #[test]
    fn parse_and_format_round_trip() {
        let t = parse("2016-05-29T08:30:00.1301617").unwrap();
        assert_eq!(format_ticks(t), "2016-05-29T08:30:00.1301617Z");
        assert_eq!(format_ticks(0), "1970-01-01T00:00:00.0000000Z");
        assert_eq!(
            format_ticks(-11_644_473_600_000 * 10_000),
            "1601-01-01T00:00:00.0000000Z"
        );
        assert!(parse("2019-02-30T00:00:00").is_none());
        assert!(parse("nonsense").is_none());
    }

    #[test]
    fn diff_counts_boundaries() {
        let d = |p: &str| {
            call(
                "DATETIMEDIFF",
                &[
                    v(p),
                    v("2019-02-04T16:00:00.0000000"),
                    v("2018-03-05T05:00:00.0000000"),
                ],
            )
            .unwrap()
        };
        assert_eq!(d("yyyy"), Value::from(-1));
        assert_eq!(d("mm"), Value::from(-11));
        assert_eq!(d("dd"), Value::from(-336));
        assert_eq!(d("hh"), Value::from(-8075));
        assert_eq!(d("ss"), Value::from(-29_070_000));
    }

    #[test]
    fn add_clamps_month_end() {
        let r = call(
            "DATETIMEADD",
            &[
                v("mm"),
                Val::Own(Value::from(1)),
                v("2020-01-31T00:00:00.0000000Z"),
            ],
        );
        assert_eq!(
            r,
            Some(Value::String("2020-02-29T00:00:00.0000000Z".into()))
        );
    }
}

//! Date and time functions.

use super::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DateFn {
    GetCurrentDateTime,
    GetCurrentDateTimeStatic,
    GetCurrentTimestamp,
    GetCurrentTimestampStatic,
    GetCurrentTicks,
    GetCurrentTicksStatic,
    DateTimeAdd,
    DateTimeDiff,
    DateTimeFromParts,
    DateTimePart,
    DateTimeBin,
    DateTimeToTicks,
    DateTimeToTimestamp,
    TicksToDateTime,
    TimestampToDateTime,
    Now,
    Ago,
    DateTimeFormat,
    Day,
    Month,
    Year,
}

pub(super) fn call<'a>(f: DateFn, args: Vec<Val<'a>>, cx: &Ctx) -> R<Val<'a>> {
    let a = &args;
    Ok(match f {
        DateFn::GetCurrentDateTime => s(datetime::format_ticks(datetime::unix_ms_to_ticks(
            datetime::now_millis(),
        ))),
        DateFn::GetCurrentDateTimeStatic => s(datetime::format_ticks(datetime::unix_ms_to_ticks(
            cx.now_millis,
        ))),
        DateFn::GetCurrentTimestamp => n(datetime::now_millis() as f64),
        DateFn::GetCurrentTimestampStatic => n(cx.now_millis as f64),
        DateFn::GetCurrentTicks => n(datetime::now_unix_ticks() as f64),
        DateFn::GetCurrentTicksStatic => n((cx.now_millis * 10_000) as f64),
        DateFn::DateTimeAdd
        | DateFn::DateTimeDiff
        | DateFn::DateTimeFromParts
        | DateFn::DateTimePart
        | DateFn::DateTimeBin
        | DateFn::DateTimeToTicks
        | DateFn::DateTimeToTimestamp
        | DateFn::TicksToDateTime
        | DateFn::TimestampToDateTime => Val::from_opt(datetime::call(Func::Date(f).name(), a)),
        // `NOW()` is the current UTC time, `NOW(part, n)` that moved by n of the part,
        // `AGO(part, n)` moved back (learn.microsoft.com/cosmos-db/query/now, …/ago).
        DateFn::Now | DateFn::Ago => {
            let now = datetime::now_unix_ticks();
            let moved = match (a.first(), a.get(1)) {
                (None, _) => Some(now),
                (Some(p), Some(k)) => match (p.as_str(), int(k)) {
                    (Some(p), Some(k)) => {
                        let k = if f == DateFn::Ago {
                            k.checked_neg()
                        } else {
                            Some(k)
                        };
                        k.and_then(|k| datetime::add(p, k, now))
                    }
                    _ => None,
                },
                (Some(_), None) => None,
            };
            moved.map_or(Val::Undef, |t| s(datetime::format_ticks(t)))
        }
        DateFn::DateTimeFormat => match (a[0].as_str(), a[1].as_str()) {
            (Some(d), Some(fmt)) => match datetime::parse_spaced(d) {
                Some(t) => {
                    SizeBudget::default().add_bytes(fmt.len().saturating_mul(8))?;
                    s(format_custom(datetime::civil(t), fmt))
                }
                None => Val::Undef,
            },
            _ => Val::Undef,
        },
        // As `DATETIMEPART` with the day, month or year.
        DateFn::Day | DateFn::Month | DateFn::Year => {
            let part = match f {
                DateFn::Day => "day",
                DateFn::Month => "month",
                _ => "year",
            };
            let args = [Val::Own(Value::String(part.into())), a[0].clone()];
            Val::from_opt(datetime::call("DATETIMEPART", &args))
        }
    })
}

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const DAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];

/// `DATETIMEFORMAT`'s format string over a date-time's civil fields (see
/// [`datetime::civil`]). The service's page lists no specifiers; its examples are .NET's
/// custom date and time format strings under the invariant culture, which this follows:
/// `yyyy` (runs of `y`), `M`/`MM`/`MMM`/`MMMM`, `d`/`dd`/`ddd`/`dddd`, `H`/`HH`, `h`/`hh`,
/// `m`/`mm`, `s`/`ss`, `f`…`fffffff`, `F`…`FFFFFFF` (trailing zeros dropped), `t`/`tt`,
/// `K`, `z`/`zz`/`zzz` (UTC), `\` escaping one character and quoted literals; any other
/// character stands for itself. As the page's example shows, a `.` before an `F` run that
/// prints nothing stays.
fn format_custom([y, mo, d, h, mi, sec, frac]: [i64; 7], fmt: &str) -> String {
    let chars: Vec<char> = fmt.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let run = chars[i..].iter().take_while(|&&x| x == c).count();
        let pad = |v: i64, w: usize| format!("{v:0w$}");
        let mut take = run;
        match c {
            'y' => {
                out += &match run {
                    1 => (y % 100).to_string(),
                    2 => pad(y % 100, 2),
                    w => pad(y, w),
                }
            }
            'M' => {
                out += &match run {
                    1 | 2 => pad(mo, run),
                    3 => MONTHS[(mo - 1) as usize][..3].to_string(),
                    _ => MONTHS[(mo - 1) as usize].to_string(),
                }
            }
            'd' => {
                out += &match run {
                    1 | 2 => pad(d, run),
                    r => {
                        // 1970-01-01 was a Thursday.
                        let days = (datetime::parse(&format!("{y:04}-{mo:02}-{d:02}"))
                            .unwrap_or(0))
                        .div_euclid(864_000_000_000);
                        let name = DAYS[(days + 4).rem_euclid(7) as usize];
                        if r == 3 {
                            name[..3].to_string()
                        } else {
                            name.to_string()
                        }
                    }
                }
            }
            'H' => out += &pad(h, run.min(2)),
            'h' => out += &pad(if h % 12 == 0 { 12 } else { h % 12 }, run.min(2)),
            'm' => out += &pad(mi, run.min(2)),
            's' => out += &pad(sec, run.min(2)),
            'f' | 'F' => {
                take = run.min(7);
                let digits = format!("{frac:07}");
                let shown = &digits[..take];
                out += if c == 'F' {
                    shown.trim_end_matches('0')
                } else {
                    shown
                };
            }
            't' => {
                let ampm = if h < 12 { "AM" } else { "PM" };
                out += if run == 1 { &ampm[..1] } else { ampm };
            }
            'K' => {
                take = 1;
                out.push('Z');
            }
            'z' => {
                out += match run {
                    1 => "+0",
                    2 => "+00",
                    _ => "+00:00",
                }
            }
            '\\' => {
                take = 2.min(chars.len() - i);
                out.extend(chars.get(i + 1));
            }
            '\'' | '"' => {
                let end = chars[i + 1..]
                    .iter()
                    .position(|&x| x == c)
                    .map_or(chars.len(), |p| i + 1 + p);
                out.extend(&chars[i + 1..end]);
                take = (end + 1).min(chars.len()) - i;
            }
            _ => {
                take = 1;
                out.push(c);
            }
        }
        i += take;
    }
    out
}

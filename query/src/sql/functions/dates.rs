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
    })
}

//! Cosmos SQL system functions: the [`Func`] enum every call resolves to once, when the query
//! is parsed, and one module per family with the functions' bodies.
//!
//! Arguments of the wrong type make a function return undefined (as in Cosmos), never an
//! error; only unknown names, wrong argument counts and invalid regular expressions are
//! errors.

mod arrays;
mod dates;
mod math;
mod regex;
mod search;
mod spatial_fns;
mod strings;
mod types;

pub use arrays::ArrayFn;
pub use dates::DateFn;
pub use math::MathFn;
pub use regex::RegexFn;
pub use search::SearchFn;
pub use spatial_fns::SpatialFn;
pub use strings::StrFn;
pub use types::TypeFn;

use super::ctx::Ctx;
use super::datetime;
use super::error::QueryError;
use super::limits::SizeBudget;
use super::spatial;
use super::value::{self, canonical, json_equal, number, Val};
use serde_json::{Map, Value};

type R<T> = Result<T, QueryError>;

/// A system function, resolved from its name once, when the query is parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Func {
    Type(TypeFn),
    Str(StrFn),
    Math(MathFn),
    Array(ArrayFn),
    Date(DateFn),
    Regex(RegexFn),
    Spatial(SpatialFn),
    Search(SearchFn),
}

/// (name, min args, max args, function) of every system function.
const FUNCTIONS: &[(&str, usize, usize, Func)] = &[
    ("IS_ARRAY", 1, 1, Func::Type(TypeFn::IsArray)),
    ("IS_BOOL", 1, 1, Func::Type(TypeFn::IsBool)),
    ("IS_DEFINED", 1, 1, Func::Type(TypeFn::IsDefined)),
    ("IS_FINITE_NUMBER", 1, 1, Func::Type(TypeFn::IsFiniteNumber)),
    ("IS_INTEGER", 1, 1, Func::Type(TypeFn::IsInteger)),
    ("IS_NULL", 1, 1, Func::Type(TypeFn::IsNull)),
    ("IS_NUMBER", 1, 1, Func::Type(TypeFn::IsNumber)),
    ("IS_OBJECT", 1, 1, Func::Type(TypeFn::IsObject)),
    ("IS_PRIMITIVE", 1, 1, Func::Type(TypeFn::IsPrimitive)),
    ("IS_STRING", 1, 1, Func::Type(TypeFn::IsString)),
    ("IS_DATETIME", 1, 1, Func::Type(TypeFn::IsDateTime)),
    ("CONCAT", 2, usize::MAX, Func::Str(StrFn::Concat)),
    ("CONTAINS", 2, 3, Func::Str(StrFn::Contains)),
    ("ENDSWITH", 2, 3, Func::Str(StrFn::EndsWith)),
    ("STARTSWITH", 2, 3, Func::Str(StrFn::StartsWith)),
    ("INDEX_OF", 2, 3, Func::Str(StrFn::IndexOf)),
    ("LEFT", 2, 2, Func::Str(StrFn::Left)),
    ("RIGHT", 2, 2, Func::Str(StrFn::Right)),
    ("LENGTH", 1, 1, Func::Str(StrFn::Length)),
    ("LOWER", 1, 1, Func::Str(StrFn::Lower)),
    ("UPPER", 1, 1, Func::Str(StrFn::Upper)),
    ("LTRIM", 1, 2, Func::Str(StrFn::Ltrim)),
    ("RTRIM", 1, 2, Func::Str(StrFn::Rtrim)),
    ("TRIM", 1, 2, Func::Str(StrFn::Trim)),
    ("REPLACE", 3, 3, Func::Str(StrFn::Replace)),
    ("REPLICATE", 2, 2, Func::Str(StrFn::Replicate)),
    ("REVERSE", 1, 1, Func::Str(StrFn::Reverse)),
    ("SUBSTRING", 3, 3, Func::Str(StrFn::Substring)),
    ("STRINGEQUALS", 2, 3, Func::Str(StrFn::StringEquals)),
    ("TOSTRING", 1, 1, Func::Str(StrFn::ToString)),
    ("STRINGTOARRAY", 1, 1, Func::Str(StrFn::StringToArray)),
    ("STRINGTOBOOLEAN", 1, 1, Func::Str(StrFn::StringToBoolean)),
    ("STRINGTONULL", 1, 1, Func::Str(StrFn::StringToNull)),
    ("STRINGTONUMBER", 1, 1, Func::Str(StrFn::StringToNumber)),
    ("STRINGTOOBJECT", 1, 1, Func::Str(StrFn::StringToObject)),
    ("REGEXMATCH", 2, 3, Func::Regex(RegexFn::Match)),
    ("REGEXEXTRACT", 2, 4, Func::Regex(RegexFn::Extract)),
    ("REGEXEXTRACTALL", 2, 4, Func::Regex(RegexFn::ExtractAll)),
    ("REGEXREPLACE", 3, 4, Func::Regex(RegexFn::Replace)),
    ("REGEXREPLACEALL", 3, 4, Func::Regex(RegexFn::ReplaceAll)),
    (
        "CONTAINS_ANY_CI",
        2,
        usize::MAX,
        Func::Str(StrFn::ContainsAnyCi),
    ),
    (
        "CONTAINS_ANY_CS",
        2,
        usize::MAX,
        Func::Str(StrFn::ContainsAnyCs),
    ),
    (
        "CONTAINS_ALL_CI",
        2,
        usize::MAX,
        Func::Str(StrFn::ContainsAllCi),
    ),
    (
        "CONTAINS_ALL_CS",
        2,
        usize::MAX,
        Func::Str(StrFn::ContainsAllCs),
    ),
    ("LASTINDEXOF", 2, 3, Func::Str(StrFn::LastIndexOf)),
    ("SUBSTRINGAFTER", 2, 2, Func::Str(StrFn::SubstringAfter)),
    ("SUBSTRINGBEFORE", 2, 2, Func::Str(StrFn::SubstringBefore)),
    (
        "LASTSUBSTRINGAFTER",
        2,
        2,
        Func::Str(StrFn::LastSubstringAfter),
    ),
    (
        "LASTSUBSTRINGBEFORE",
        2,
        2,
        Func::Str(StrFn::LastSubstringBefore),
    ),
    ("STRINGJOIN", 2, 2, Func::Str(StrFn::StringJoin)),
    ("STRINGSPLIT", 2, 2, Func::Str(StrFn::StringSplit)),
    ("ABS", 1, 1, Func::Math(MathFn::Abs)),
    ("ACOS", 1, 1, Func::Math(MathFn::Acos)),
    ("ASIN", 1, 1, Func::Math(MathFn::Asin)),
    ("ATAN", 1, 1, Func::Math(MathFn::Atan)),
    ("ATN2", 2, 2, Func::Math(MathFn::Atn2)),
    ("CEILING", 1, 1, Func::Math(MathFn::Ceiling)),
    ("COS", 1, 1, Func::Math(MathFn::Cos)),
    ("COT", 1, 1, Func::Math(MathFn::Cot)),
    ("DEGREES", 1, 1, Func::Math(MathFn::Degrees)),
    ("EXP", 1, 1, Func::Math(MathFn::Exp)),
    ("FLOOR", 1, 1, Func::Math(MathFn::Floor)),
    ("LOG", 1, 2, Func::Math(MathFn::Log)),
    ("LOG10", 1, 1, Func::Math(MathFn::Log10)),
    ("PI", 0, 0, Func::Math(MathFn::Pi)),
    ("POWER", 2, 2, Func::Math(MathFn::Power)),
    ("RADIANS", 1, 1, Func::Math(MathFn::Radians)),
    ("RAND", 0, 0, Func::Math(MathFn::Rand)),
    ("ROUND", 1, 1, Func::Math(MathFn::Round)),
    ("SIGN", 1, 1, Func::Math(MathFn::Sign)),
    ("SIN", 1, 1, Func::Math(MathFn::Sin)),
    ("SQRT", 1, 1, Func::Math(MathFn::Sqrt)),
    ("SQUARE", 1, 1, Func::Math(MathFn::Square)),
    ("TAN", 1, 1, Func::Math(MathFn::Tan)),
    ("TRUNC", 1, 1, Func::Math(MathFn::Trunc)),
    ("NUMBERBIN", 1, 2, Func::Math(MathFn::NumberBin)),
    ("INTADD", 2, 2, Func::Math(MathFn::IntAdd)),
    ("INTBITAND", 2, 2, Func::Math(MathFn::IntBitAnd)),
    ("INTBITLEFTSHIFT", 2, 2, Func::Math(MathFn::IntBitLeftShift)),
    ("INTBITNOT", 1, 1, Func::Math(MathFn::IntBitNot)),
    ("INTBITOR", 2, 2, Func::Math(MathFn::IntBitOr)),
    (
        "INTBITRIGHTSHIFT",
        2,
        2,
        Func::Math(MathFn::IntBitRightShift),
    ),
    ("INTBITXOR", 2, 2, Func::Math(MathFn::IntBitXor)),
    ("INTDIV", 2, 2, Func::Math(MathFn::IntDiv)),
    ("INTMOD", 2, 2, Func::Math(MathFn::IntMod)),
    ("INTMUL", 2, 2, Func::Math(MathFn::IntMul)),
    ("INTSUB", 2, 2, Func::Math(MathFn::IntSub)),
    (
        "ARRAY_CONCAT",
        2,
        usize::MAX,
        Func::Array(ArrayFn::ArrayConcat),
    ),
    ("ARRAY_CONTAINS", 2, 3, Func::Array(ArrayFn::ArrayContains)),
    (
        "ARRAY_CONTAINS_ANY",
        2,
        usize::MAX,
        Func::Array(ArrayFn::ArrayContainsAny),
    ),
    (
        "ARRAY_CONTAINS_ALL",
        2,
        usize::MAX,
        Func::Array(ArrayFn::ArrayContainsAll),
    ),
    ("ARRAY_LENGTH", 1, 1, Func::Array(ArrayFn::ArrayLength)),
    ("ARRAY_SLICE", 2, 3, Func::Array(ArrayFn::ArraySlice)),
    ("SETINTERSECT", 2, 2, Func::Array(ArrayFn::SetIntersect)),
    ("SETUNION", 2, 2, Func::Array(ArrayFn::SetUnion)),
    ("SETDIFFERENCE", 2, 2, Func::Array(ArrayFn::SetDifference)),
    ("SETEQUAL", 2, 2, Func::Array(ArrayFn::SetEqual)),
    ("ARRAY_MAX", 1, 1, Func::Array(ArrayFn::ArrayMax)),
    ("ARRAY_MIN", 1, 1, Func::Array(ArrayFn::ArrayMin)),
    ("ARRAY_SUM", 1, 1, Func::Array(ArrayFn::ArraySum)),
    ("ARRAY_AVG", 1, 1, Func::Array(ArrayFn::ArrayAvg)),
    ("ARRAY_MEDIAN", 1, 1, Func::Array(ArrayFn::ArrayMedian)),
    ("CHOOSE", 2, usize::MAX, Func::Array(ArrayFn::Choose)),
    ("OBJECTTOARRAY", 1, 3, Func::Array(ArrayFn::ObjectToArray)),
    ("IIF", 3, 3, Func::Array(ArrayFn::Iif)),
    ("DOCUMENTID", 1, 1, Func::Array(ArrayFn::DocumentId)),
    (
        "GETCURRENTDATETIME",
        0,
        0,
        Func::Date(DateFn::GetCurrentDateTime),
    ),
    (
        "GETCURRENTDATETIMESTATIC",
        0,
        0,
        Func::Date(DateFn::GetCurrentDateTimeStatic),
    ),
    (
        "GETCURRENTTIMESTAMP",
        0,
        0,
        Func::Date(DateFn::GetCurrentTimestamp),
    ),
    (
        "GETCURRENTTIMESTAMPSTATIC",
        0,
        0,
        Func::Date(DateFn::GetCurrentTimestampStatic),
    ),
    ("GETCURRENTTICKS", 0, 0, Func::Date(DateFn::GetCurrentTicks)),
    (
        "GETCURRENTTICKSSTATIC",
        0,
        0,
        Func::Date(DateFn::GetCurrentTicksStatic),
    ),
    ("DATETIMEADD", 3, 3, Func::Date(DateFn::DateTimeAdd)),
    ("DATETIMEDIFF", 3, 3, Func::Date(DateFn::DateTimeDiff)),
    (
        "DATETIMEFROMPARTS",
        3,
        7,
        Func::Date(DateFn::DateTimeFromParts),
    ),
    ("DATETIMEPART", 2, 2, Func::Date(DateFn::DateTimePart)),
    ("DATETIMEBIN", 2, 4, Func::Date(DateFn::DateTimeBin)),
    ("DATETIMETOTICKS", 1, 1, Func::Date(DateFn::DateTimeToTicks)),
    (
        "DATETIMETOTIMESTAMP",
        1,
        1,
        Func::Date(DateFn::DateTimeToTimestamp),
    ),
    ("TICKSTODATETIME", 1, 1, Func::Date(DateFn::TicksToDateTime)),
    ("NOW", 0, 2, Func::Date(DateFn::Now)),
    ("AGO", 2, 2, Func::Date(DateFn::Ago)),
    ("DATETIMEFORMAT", 2, 2, Func::Date(DateFn::DateTimeFormat)),
    ("DAY", 1, 1, Func::Date(DateFn::Day)),
    ("MONTH", 1, 1, Func::Date(DateFn::Month)),
    ("YEAR", 1, 1, Func::Date(DateFn::Year)),
    (
        "TIMESTAMPTODATETIME",
        1,
        1,
        Func::Date(DateFn::TimestampToDateTime),
    ),
    ("ST_DISTANCE", 2, 2, Func::Spatial(SpatialFn::StDistance)),
    ("ST_WITHIN", 2, 2, Func::Spatial(SpatialFn::StWithin)),
    (
        "ST_INTERSECTS",
        2,
        2,
        Func::Spatial(SpatialFn::StIntersects),
    ),
    ("ST_ISVALID", 1, 1, Func::Spatial(SpatialFn::StIsValid)),
    (
        "ST_ISVALIDDETAILED",
        1,
        1,
        Func::Spatial(SpatialFn::StIsValidDetailed),
    ),
    ("ST_AREA", 1, 1, Func::Spatial(SpatialFn::StArea)),
    (
        "FULLTEXTCONTAINS",
        2,
        2,
        Func::Search(SearchFn::FullTextContains),
    ),
    (
        "FULLTEXTCONTAINSALL",
        2,
        usize::MAX,
        Func::Search(SearchFn::FullTextContainsAll),
    ),
    (
        "FULLTEXTCONTAINSANY",
        2,
        usize::MAX,
        Func::Search(SearchFn::FullTextContainsAny),
    ),
    (
        "FULLTEXTSCORE",
        2,
        usize::MAX,
        Func::Search(SearchFn::FullTextScore),
    ),
    (
        "_FULLTEXTSCORE",
        5,
        5,
        Func::Search(SearchFn::FullTextScoreWith),
    ),
    (
        "_FULLTEXTWORDCOUNT",
        1,
        1,
        Func::Search(SearchFn::FullTextWordCount),
    ),
    ("RRF", 1, usize::MAX, Func::Search(SearchFn::Rrf)),
    (
        "VECTORDISTANCE",
        2,
        4,
        Func::Search(SearchFn::VectorDistance),
    ),
];

impl Func {
    /// The function a name (already uppercased) calls, if it is a system function.
    pub fn lookup(name: &str) -> Option<Func> {
        FUNCTIONS.iter().find(|e| e.0 == name).map(|e| e.3)
    }

    /// The function's name as Cosmos SQL spells it.
    pub fn name(self) -> &'static str {
        FUNCTIONS
            .iter()
            .find(|e| e.3 == self)
            .map(|e| e.0)
            .unwrap_or("?")
    }
}

/// Validates a call at bind time: a valid argument count.
pub fn check(f: Func, nargs: usize) -> R<()> {
    let Some(&(name, lo, hi, _)) = FUNCTIONS.iter().find(|e| e.3 == f) else {
        return Ok(());
    };
    if nargs >= lo && nargs <= hi {
        return Ok(());
    }
    let expected = if lo == hi {
        format!("{lo}")
    } else if hi == usize::MAX {
        format!("at least {lo}")
    } else {
        format!("{lo} to {hi}")
    };
    Err(QueryError::semantic(format!(
        "The function '{name}' takes {expected} argument(s), not {nargs}."
    )))
}

/// The error for a name that is no system function.
pub fn unknown(name: &str) -> QueryError {
    QueryError::semantic(format!(
        "'{name}' is not a recognized built-in function name."
    ))
}

/// Calls `f` (its argument count was checked at bind time).
pub fn call<'a>(f: Func, args: Vec<Val<'a>>, cx: &Ctx) -> R<Val<'a>> {
    call_in(f, args, cx, None)
}

/// [`call`], knowing the document path the first argument names (full-text functions analyse
/// text in that path's language).
pub fn call_in<'a>(f: Func, args: Vec<Val<'a>>, cx: &Ctx, path: Option<&str>) -> R<Val<'a>> {
    match f {
        Func::Type(g) => types::call(g, args, cx),
        Func::Str(g) => strings::call(g, args, cx),
        Func::Math(g) => math::call(g, args, cx),
        Func::Array(g) => arrays::call(g, args, cx),
        Func::Date(g) => dates::call(g, args, cx),
        Func::Regex(g) => regex::call(g, args, cx),
        Func::Spatial(g) => spatial_fns::call(g, args, cx),
        Func::Search(g) => search::call(g, args, cx.text_language(path)),
    }
}

pub(super) fn b<'a>(x: bool) -> Val<'a> {
    Val::Own(Value::Bool(x))
}

pub(super) fn n<'a>(f: f64) -> Val<'a> {
    Val::from_opt(number(f))
}

pub(super) fn s<'a>(x: String) -> Val<'a> {
    Val::Own(Value::String(x))
}

pub(super) fn math1<'a>(args: &[Val<'a>], f: impl Fn(f64) -> f64) -> Val<'a> {
    args[0].as_f64().map(|x| n(f(x))).unwrap_or(Val::Undef)
}

/// An integer argument (for the Int* functions and counts).
pub(super) fn int(v: &Val<'_>) -> Option<i64> {
    let f = v.as_f64()?;
    (f.fract() == 0.0 && f.abs() <= 9.007_199_254_740_992e15).then_some(f as i64)
}

pub(super) fn int2<'a>(args: &[Val<'a>], f: impl Fn(i64, i64) -> Option<i64>) -> Val<'a> {
    match (int(&args[0]), int(&args[1])) {
        (Some(a), Some(b)) => f(a, b).map(|r| n(r as f64)).unwrap_or(Val::Undef),
        _ => Val::Undef,
    }
}

pub(super) fn opt_bool(args: &[Val<'_>], i: usize) -> Option<bool> {
    match args.get(i) {
        None => Some(false),
        Some(v) => v.as_bool(),
    }
}

pub(super) fn chars_of(x: &str) -> Vec<char> {
    x.chars().collect()
}

/// Rounds half away from zero, as Cosmos's ROUND does.
pub(super) fn round_half_away(x: f64) -> f64 {
    x.round()
}

/// Decimal places of a bin size like 0.01 (to round away binary noise).
pub(super) fn decimals_of(bin: f64) -> i32 {
    let text = format!("{}", bin.abs());
    match text.split_once('.') {
        Some((_, frac)) => frac.len() as i32,
        None => 0,
    }
}

/// ARRAY_CONTAINS: full equality, or (partial) the element is an object containing every
/// property of the wanted object.
pub(super) fn contains_match(elem: &Value, wanted: &Value, partial: bool) -> bool {
    if partial {
        if let (Value::Object(e), Value::Object(w)) = (elem, wanted) {
            return w
                .iter()
                .all(|(k, v)| e.get(k).is_some_and(|x| json_equal(x, v)));
        }
    }
    json_equal(elem, wanted)
}

/// The document number inside a document `_rid`: bytes 8..16, little-endian, whose top 16
/// bits name the physical partition it was created in. DOCUMENTID is the count below them,
/// "unique only within a single physical partition"
/// (https://learn.microsoft.com/en-us/cosmos-db/query/documentid).
pub(super) fn document_id(rid: &str) -> Option<u64> {
    use base64::Engine as _;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(rid.replace('-', "/"))
        .ok()?;
    if bytes.len() < 16 {
        return None;
    }
    Some(u64::from_le_bytes(bytes[8..16].try_into().ok()?) & ((1 << 48) - 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_function_has_one_name_and_one_entry() {
        for (name, lo, hi, f) in FUNCTIONS {
            assert_eq!(Func::lookup(name), Some(*f), "{name}");
            assert_eq!(f.name(), *name);
            assert!(lo <= hi, "{name}");
            assert_eq!(FUNCTIONS.iter().filter(|e| e.3 == *f).count(), 1, "{name}");
        }
        assert_eq!(Func::lookup("NOSUCH"), None);
        assert!(check(Func::Str(StrFn::Concat), 1).is_err());
        assert!(check(Func::Str(StrFn::Concat), 7).is_ok());
    }
}

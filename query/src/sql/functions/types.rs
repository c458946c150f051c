//! Type checks: `IS_ARRAY`, `IS_DEFINED`, ...

use super::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TypeFn {
    IsArray,
    IsBool,
    IsDefined,
    IsFiniteNumber,
    IsInteger,
    IsNull,
    IsNumber,
    IsObject,
    IsPrimitive,
    IsString,
    IsDateTime,
}

pub(super) fn call<'a>(f: TypeFn, args: Vec<Val<'a>>, _cx: &Ctx) -> R<Val<'a>> {
    let a = &args;
    let get = |i: usize| a.get(i).and_then(|v| v.get());
    Ok(match f {
        TypeFn::IsArray => b(matches!(get(0), Some(Value::Array(_)))),
        TypeFn::IsBool => b(matches!(get(0), Some(Value::Bool(_)))),
        TypeFn::IsDefined => b(get(0).is_some()),
        TypeFn::IsFiniteNumber => b(a[0].as_f64().is_some_and(f64::is_finite)),
        TypeFn::IsInteger => b(
            matches!(get(0), Some(Value::Number(x)) if x.is_i64() || x.is_u64() || x.as_f64().is_some_and(|f| f.fract() == 0.0 && f.abs() < 9.3e18)),
        ),
        TypeFn::IsNull => b(matches!(get(0), Some(Value::Null))),
        TypeFn::IsNumber => b(matches!(get(0), Some(Value::Number(_)))
            || get(0).and_then(value::as_nonfinite).is_some()),
        TypeFn::IsObject => b(matches!(get(0), Some(Value::Object(_)))),
        TypeFn::IsPrimitive => b(matches!(
            get(0),
            Some(Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_))
        )),
        TypeFn::IsString => b(matches!(get(0), Some(Value::String(_)))),
        TypeFn::IsDateTime => b(a[0].as_str().is_some_and(datetime::is_datetime)),
    })
}

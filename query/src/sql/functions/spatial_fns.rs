//! Spatial functions (geometry in `sql::spatial`).

use super::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpatialFn {
    StDistance,
    StWithin,
    StIntersects,
    StIsValid,
    StIsValidDetailed,
    StArea,
}

pub(super) fn call<'a>(f: SpatialFn, args: Vec<Val<'a>>, _cx: &Ctx) -> R<Val<'a>> {
    let a = &args;
    let get = |i: usize| a.get(i).and_then(|v| v.get());
    Ok(match f {
        SpatialFn::StDistance
        | SpatialFn::StWithin
        | SpatialFn::StIntersects
        | SpatialFn::StIsValid
        | SpatialFn::StIsValidDetailed
        | SpatialFn::StArea => {
            Val::from_opt(spatial::call(Func::Spatial(f).name(), get(0), get(1)))
        }
    })
}

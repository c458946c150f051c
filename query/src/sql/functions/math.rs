//! Mathematical and integer functions.

use super::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MathFn {
    Abs,
    Acos,
    Asin,
    Atan,
    Atn2,
    Ceiling,
    Cos,
    Cot,
    Degrees,
    Exp,
    Floor,
    Log,
    Log10,
    Pi,
    Power,
    Radians,
    Rand,
    Round,
    Sign,
    Sin,
    Sqrt,
    Square,
    Tan,
    Trunc,
    NumberBin,
    IntAdd,
    IntBitAnd,
    IntBitLeftShift,
    IntBitNot,
    IntBitOr,
    IntBitRightShift,
    IntBitXor,
    IntDiv,
    IntMod,
    IntMul,
    IntSub,
}

pub(super) fn call<'a>(f: MathFn, args: Vec<Val<'a>>, _cx: &Ctx) -> R<Val<'a>> {
    let a = &args;
    Ok(match f {
        MathFn::Abs => math1(a, f64::abs),
        MathFn::Acos => math1(a, f64::acos),
        MathFn::Asin => math1(a, f64::asin),
        MathFn::Atan => math1(a, f64::atan),
        MathFn::Atn2 => match (a[0].as_f64(), a[1].as_f64()) {
            (Some(y), Some(x)) => n(y.atan2(x)),
            _ => Val::Undef,
        },
        MathFn::Ceiling => math1(a, f64::ceil),
        MathFn::Cos => math1(a, f64::cos),
        MathFn::Cot => math1(a, |x| 1.0 / x.tan()),
        MathFn::Degrees => math1(a, f64::to_degrees),
        MathFn::Exp => math1(a, f64::exp),
        MathFn::Floor => math1(a, f64::floor),
        MathFn::Log => match (a[0].as_f64(), a.get(1)) {
            (Some(x), None) => n(x.ln()),
            (Some(x), Some(base)) => base.as_f64().map(|bs| n(x.log(bs))).unwrap_or(Val::Undef),
            _ => Val::Undef,
        },
        MathFn::Log10 => math1(a, f64::log10),
        MathFn::Pi => n(std::f64::consts::PI),
        MathFn::Power => match (a[0].as_f64(), a[1].as_f64()) {
            (Some(x), Some(y)) => n(x.powf(y)),
            _ => Val::Undef,
        },
        MathFn::Radians => math1(a, f64::to_radians),
        MathFn::Rand => {
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0);
            let r = xxhash_rust::xxh3::xxh3_64(&t.to_le_bytes());
            n((r >> 11) as f64 / (1u64 << 53) as f64)
        }
        MathFn::Round => math1(a, round_half_away),
        MathFn::Sign => math1(a, |x| {
            if x > 0.0 {
                1.0
            } else if x < 0.0 {
                -1.0
            } else {
                0.0
            }
        }),
        MathFn::Sin => math1(a, f64::sin),
        MathFn::Sqrt => math1(a, f64::sqrt),
        MathFn::Square => math1(a, |x| x * x),
        MathFn::Tan => math1(a, f64::tan),
        MathFn::Trunc => math1(a, f64::trunc),
        MathFn::NumberBin => {
            let Some(x) = a[0].as_f64() else {
                return Ok(Val::Undef);
            };
            let bin = match a.get(1) {
                Some(v) => match v.as_f64() {
                    Some(b) => b,
                    None => return Ok(Val::Undef),
                },
                None => 1.0,
            };
            if bin == 0.0 {
                return Ok(Val::Undef);
            }
            let q = (x / bin).floor() * bin;
            // Undo binary noise such as 37.7000000001 for a bin of 0.1.
            let decimals = decimals_of(bin);
            n(if decimals > 0 {
                let p = 10f64.powi(decimals);
                (q * p).round() / p
            } else {
                q
            })
        }
        MathFn::IntAdd => int2(a, |x, y| x.checked_add(y)),
        MathFn::IntSub => int2(a, |x, y| x.checked_sub(y)),
        MathFn::IntMul => int2(a, |x, y| x.checked_mul(y)),
        MathFn::IntDiv => int2(a, |x, y| x.checked_div(y)),
        MathFn::IntMod => int2(a, |x, y| x.checked_rem(y)),
        MathFn::IntBitAnd => int2(a, |x, y| Some(x & y)),
        MathFn::IntBitOr => int2(a, |x, y| Some(x | y)),
        MathFn::IntBitXor => int2(a, |x, y| Some(x ^ y)),
        MathFn::IntBitLeftShift => int2(a, |x, y| (0..64).contains(&y).then(|| x << y)),
        MathFn::IntBitRightShift => int2(a, |x, y| (0..64).contains(&y).then(|| x >> y)),
        MathFn::IntBitNot => int(&a[0]).map(|x| n(!x as f64)).unwrap_or(Val::Undef),
    })
}

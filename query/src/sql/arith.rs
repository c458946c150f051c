//! Integer arithmetic exact over 64 bits, as the service computes it (DateTime ticks, ~1.8e16
//! today, are past what a double holds exactly).

use super::ast::BinOp;
use serde_json::Value;

/// `+ - * %` of two integers, exact over all of 64 bits as in the service (`None`: not two
/// integers, or the result does not fit, and the operator works in doubles).
pub fn exact_integer(op: BinOp, x: &Value, y: &Value) -> Option<i64> {
    let (i, j) = (x.as_i64()?, y.as_i64()?);
    match op {
        BinOp::Add => i.checked_add(j),
        BinOp::Sub => i.checked_sub(j),
        BinOp::Mul => i.checked_mul(j),
        // A zero remainder of a negative dividend is -0 in doubles: left to them.
        BinOp::Mod if j != 0 => i.checked_rem(j).filter(|r| *r != 0 || i >= 0),
        _ => None,
    }
}

//! Aggregate partials (COUNT, SUM, AVG, MIN, MAX): what one partition computes, how partials
//! from several partitions merge, and the final value, with Cosmos's undefined semantics.

use super::ast::AggFunc;
use super::value::{self, order_cmp};
use serde_json::Value;
use std::cmp::Ordering;

/// A partial aggregate; partials from several partitions merge.
#[derive(Debug, Clone, PartialEq)]
pub enum Acc {
    Count(u64),
    /// Sum (compensated: `sum + comp`) and count of numbers seen; `invalid` once a
    /// non-number was seen.
    Sum {
        sum: f64,
        comp: f64,
        n: u64,
        invalid: bool,
    },
    Avg {
        sum: f64,
        comp: f64,
        n: u64,
        invalid: bool,
    },
    Min {
        best: Option<Value>,
        invalid: bool,
    },
    Max {
        best: Option<Value>,
        invalid: bool,
    },
}

impl Acc {
    pub fn new(f: AggFunc) -> Self {
        match f {
            AggFunc::Count | AggFunc::CountIf => Acc::Count(0),
            AggFunc::Sum => Acc::Sum {
                sum: 0.0,
                comp: 0.0,
                n: 0,
                invalid: false,
            },
            AggFunc::Avg => Acc::Avg {
                sum: 0.0,
                comp: 0.0,
                n: 0,
                invalid: false,
            },
            AggFunc::Min => Acc::Min {
                best: None,
                invalid: false,
            },
            AggFunc::Max => Acc::Max {
                best: None,
                invalid: false,
            },
        }
    }

    pub fn add(&mut self, f: AggFunc, v: Option<&Value>) {
        match self {
            Acc::Count(c) => match f {
                AggFunc::CountIf => {
                    if v == Some(&Value::Bool(true)) {
                        *c += 1
                    }
                }
                _ => {
                    if v.is_some() {
                        *c += 1
                    }
                }
            },
            Acc::Sum {
                sum,
                comp,
                n,
                invalid,
            }
            | Acc::Avg {
                sum,
                comp,
                n,
                invalid,
            } => match v {
                None => {}
                Some(Value::Number(x)) => {
                    neumaier(sum, comp, x.as_f64().unwrap_or(0.0));
                    *n += 1;
                }
                Some(_) => *invalid = true,
            },
            Acc::Min { best, invalid } | Acc::Max { best, invalid } => {
                let want = if f == AggFunc::Min {
                    Ordering::Less
                } else {
                    Ordering::Greater
                };
                match v {
                    None => {}
                    Some(Value::Array(_)) | Some(Value::Object(_)) => *invalid = true,
                    Some(x)
                        if best
                            .as_ref()
                            .is_none_or(|b| order_cmp(Some(x), Some(b)) == want) =>
                    {
                        *best = Some(x.clone());
                    }
                    Some(_) => {}
                }
            }
        }
    }

    /// Folds another partial of the same aggregate into this one.
    pub fn merge(&mut self, other: &Acc) {
        match (self, other) {
            (Acc::Count(a), Acc::Count(b)) => *a += b,
            (
                Acc::Sum {
                    sum,
                    comp,
                    n,
                    invalid,
                },
                Acc::Sum {
                    sum: s2,
                    comp: c2,
                    n: n2,
                    invalid: i2,
                },
            )
            | (
                Acc::Avg {
                    sum,
                    comp,
                    n,
                    invalid,
                },
                Acc::Avg {
                    sum: s2,
                    comp: c2,
                    n: n2,
                    invalid: i2,
                },
            ) => {
                neumaier(sum, comp, *s2);
                neumaier(sum, comp, *c2);
                *n += n2;
                *invalid |= i2;
            }
            (
                Acc::Min { best, invalid },
                Acc::Min {
                    best: b2,
                    invalid: i2,
                },
            ) => keep_extreme(best, invalid, b2.as_ref(), *i2, Ordering::Less),
            (
                Acc::Max { best, invalid },
                Acc::Max {
                    best: b2,
                    invalid: i2,
                },
            ) => keep_extreme(best, invalid, b2.as_ref(), *i2, Ordering::Greater),
            _ => {}
        }
    }

    /// The final value (undefined for AVG/SUM/MIN/MAX of nothing, or of invalid input).
    pub fn result(&self) -> Option<Value> {
        match self {
            Acc::Count(c) => Some(Value::from(*c)),
            Acc::Sum {
                sum,
                comp,
                n,
                invalid,
            } => (!invalid && *n > 0)
                .then(|| value::number(sum + comp))
                .flatten(),
            Acc::Avg {
                sum,
                comp,
                n,
                invalid,
            } => (!invalid && *n > 0)
                .then(|| value::number(exact_mean(*sum, *comp, *n as f64)))
                .flatten(),
            Acc::Min { best, invalid } | Acc::Max { best, invalid } => {
                if *invalid {
                    None
                } else {
                    best.clone()
                }
            }
        }
    }
}

/// Merges another partition's MIN (`want` = Less) or MAX (Greater) into `best`.
fn keep_extreme(
    best: &mut Option<Value>,
    invalid: &mut bool,
    other: Option<&Value>,
    other_invalid: bool,
    want: Ordering,
) {
    *invalid |= other_invalid;
    if let Some(x) = other {
        if best
            .as_ref()
            .is_none_or(|b| order_cmp(Some(x), Some(b)) == want)
        {
            *best = Some(x.clone());
        }
    }
}

/// Neumaier's compensated summation: `sum + comp` stays correctly rounded where naive
/// addition drifts (20.28 + 5.11 + 62.21 is 87.6, not 87.60000000000001).
fn neumaier(sum: &mut f64, comp: &mut f64, x: f64) {
    let t = *sum + x;
    if sum.abs() >= x.abs() {
        *comp += (*sum - t) + x;
    } else {
        *comp += (x - t) + *sum;
    }
    *sum = t;
}

/// `(sum + comp) / n` for a compensated sum, rounded as the exact quotient would be: the
/// remainder of the first division is exact (fused multiply-add) and folded back in, so the
/// average does not depend on the order documents were summed in.
fn exact_mean(sum: f64, comp: f64, n: f64) -> f64 {
    let q = sum / n;
    let r = (-q).mul_add(n, sum);
    q + (r + comp) / n
}

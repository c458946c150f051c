//! A query's shape: its text with the literal values taken out as parameters, so that the
//! same query sent for different tenants or users is one entry of a query sample (the
//! partition-key advisor replays the shapes under candidate keys, see `strata advise`).
//!
//! Tokens are written back one space apart (`.` and brackets hug their neighbours), so
//! spacing and case of keywords do not split entries either. Literals that are part of the
//! query's structure stay: `TOP`, `OFFSET` and `LIMIT` counts, property names in `c["x"]`
//! and object keys in `{"x": …}`.

use super::lexer::{tokenize, Tok};
use serde_json::Value;

/// The prefix of the parameters [`shape`] introduces (`@__v1`, `@__v2`, …).
pub const LITERAL_PARAM: &str = "__v";

/// The shape of `text`: the text with literal strings and numbers replaced by `@__vN`, and
/// those parameters' values in order (named without the `@`, as [`super::parse_parameters`]
/// gives them). `None` when the text does not tokenize.
pub fn shape(text: &str) -> Option<(String, Vec<(String, Value)>)> {
    let tokens = tokenize(text).ok()?;
    let mut out = String::with_capacity(text.len());
    let mut values = Vec::new();
    let mut prev: Option<&Tok> = None;
    for (i, t) in tokens.iter().enumerate() {
        let next = tokens.get(i + 1).map(|t| &t.tok);
        let word = match &t.tok {
            Tok::Eof => break,
            Tok::Str(s) if structural_string(prev, next) => json_string(s),
            Tok::Num(n) if structural_number(prev, i.checked_sub(2).map(|j| &tokens[j].tok)) => {
                number(*n)
            }
            Tok::Str(s) => literal(&mut values, Value::String(s.clone())),
            Tok::Num(n) => literal(&mut values, number_value(*n)),
            Tok::Int(i) => literal(&mut values, Value::from(*i)),
            Tok::Kw(k) => (*k).to_string(),
            other => other.describe(),
        };
        if !out.is_empty() && spaced(prev, &t.tok) {
            out.push(' ');
        }
        out.push_str(&word);
        prev = Some(&t.tok);
    }
    Some((out, values))
}

/// A string that names a property (`c["x"]`, `{"x": 1}`) rather than a value.
fn structural_string(prev: Option<&Tok>, next: Option<&Tok>) -> bool {
    matches!(prev, Some(Tok::LBracket)) && matches!(next, Some(Tok::RBracket))
        || matches!(next, Some(Tok::Colon))
}

/// A count that shapes the result (`TOP 10`, `OFFSET 0 LIMIT 20`, `COUNT(1)`) rather than
/// a value.
fn structural_number(prev: Option<&Tok>, before: Option<&Tok>) -> bool {
    matches!(prev, Some(Tok::Kw("TOP" | "OFFSET" | "LIMIT")))
        || matches!((before, prev), (Some(Tok::Ident(f)), Some(Tok::LParen)) if f.eq_ignore_ascii_case("COUNT"))
}

fn literal(values: &mut Vec<(String, Value)>, v: Value) -> String {
    let name = format!("{LITERAL_PARAM}{}", values.len() + 1);
    let text = format!("@{name}");
    values.push((name, v));
    text
}

fn number_value(n: f64) -> Value {
    if n.fract() == 0.0 && n.abs() < 9.007_199_254_740_992e15 {
        Value::from(n as i64)
    } else {
        serde_json::Number::from_f64(n).map_or(Value::Null, Value::Number)
    }
}

fn number(n: f64) -> String {
    number_value(n).to_string()
}

fn json_string(s: &str) -> String {
    Value::String(s.to_string()).to_string()
}

/// Whether a space goes between two tokens: none around `.`, inside brackets, braces and
/// parentheses,
/// before `,` and `:`, nor between a function's name and its `(`.
fn spaced(prev: Option<&Tok>, t: &Tok) -> bool {
    let Some(prev) = prev else { return false };
    let hugs_next = matches!(prev, Tok::Dot | Tok::LParen | Tok::LBracket | Tok::LBrace);
    let hugs_prev = matches!(
        t,
        Tok::Dot | Tok::RParen | Tok::RBracket | Tok::RBrace | Tok::Comma | Tok::Colon
    );
    let call = matches!(t, Tok::LParen | Tok::LBracket) && matches!(prev, Tok::Ident(_));
    !(hugs_next || hugs_prev || call)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_become_parameters_and_spacing_is_canonical() {
        let (a, va) = shape("select * from c where c.TenantId = 'acme' and c.n >= 3").unwrap();
        let (b, vb) = shape("SELECT *  FROM c WHERE c.TenantId=\"zeta\" AND c.n>=4").unwrap();
        assert_eq!(a, b);
        assert_eq!(
            a,
            "SELECT * FROM c WHERE c.TenantId = @__v1 AND c.n >= @__v2"
        );
        assert_eq!(va[0], ("__v1".into(), Value::from("acme")));
        assert_eq!(vb[1], ("__v2".into(), Value::from(4)));
    }

    #[test]
    fn structure_stays() {
        let (s, v) =
            shape("SELECT TOP 5 c[\"x\"], {\"k\": c.y} FROM c WHERE STARTSWITH(c.id, 'a') OFFSET 0 LIMIT 10")
                .unwrap();
        assert_eq!(
            s,
            "SELECT TOP 5 c[\"x\"], {\"k\": c.y} FROM c WHERE STARTSWITH(c.id, @__v1) OFFSET 0 LIMIT 10"
        );
        assert_eq!(v.len(), 1);
        // The shape is itself a query that prepares with its values bound.
        let p = crate::sql::prepare(&s, &v, None);
        assert!(p.is_ok(), "{p:?}");
    }

    #[test]
    fn parameters_keep_their_names() {
        let (s, _) = shape("SELECT VALUE COUNT(1) FROM c").unwrap();
        assert_eq!(s, "SELECT VALUE COUNT(1) FROM c");
        let (s, v) = shape("SELECT * FROM c WHERE c.a = @a AND c.b = -1.5").unwrap();
        assert_eq!(s, "SELECT * FROM c WHERE c.a = @a AND c.b = - @__v1");
        assert_eq!(v[0].1, Value::from(1.5));
        assert!(shape("SELECT 'unterminated").is_none());
    }
}

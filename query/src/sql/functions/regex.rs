//! Regular-expression functions: `RegexMatch`, and `REGEXEXTRACT`, `REGEXEXTRACTALL`,
//! `REGEXREPLACE`, `REGEXREPLACEALL` as the service's query reference pages define them
//! (learn.microsoft.com/cosmos-db/query/regexextract and its siblings): a pattern, the
//! modifiers `i` (ignore case), `m` (multi-line), `s` (dot matches a newline) and `x` (ignore
//! pattern whitespace), and for the extractions a capture group (1-based; 0 or none is the
//! whole match).
//!
//! Patterns are the `regex` crate's, which runs in time linear in the text and bounds the
//! compiled program's size, so no pattern can take the server's CPU or memory; it has no
//! look-around or back-references, which the service's PCRE has (such a pattern is a 400).

use super::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegexFn {
    Match,
    Extract,
    ExtractAll,
    Replace,
    ReplaceAll,
}

pub(super) fn call<'a>(f: RegexFn, args: Vec<Val<'a>>, _cx: &Ctx) -> R<Val<'a>> {
    let a = &args;
    let (Some(x), Some(p)) = (a[0].as_str(), a[1].as_str()) else {
        return Ok(Val::Undef);
    };
    // The modifiers' place: after the replacement for the replacements.
    let at = match f {
        RegexFn::Replace | RegexFn::ReplaceAll => 3,
        _ => 2,
    };
    let extracts = matches!(f, RegexFn::Extract | RegexFn::ExtractAll);
    let (mods, group) = match (a.get(at), a.get(at + 1)) {
        (None, _) => ("", None),
        // An extraction's group alone in the modifiers' place (`REGEXEXTRACT(s, p, 1)`).
        (Some(g), None) if g.as_str().is_none() && extracts => ("", Some(g)),
        (Some(m), g) => match m.as_str() {
            Some(m) => (m, g),
            None => return Ok(Val::Undef),
        },
    };
    let group = match group {
        None => 0,
        Some(g) => match int(g) {
            Some(i) if i >= 0 => i as usize,
            _ => return Ok(Val::Undef),
        },
    };
    let re = compile(f, p, mods)?;
    Ok(match f {
        RegexFn::Match => b(re.is_match(x)),
        RegexFn::Extract => re
            .captures(x)
            .and_then(|c| c.get(group))
            .map(|m| s(m.as_str().to_string()))
            .unwrap_or(Val::Undef),
        RegexFn::ExtractAll => {
            let mut budget = SizeBudget::default();
            let mut out = Vec::new();
            for c in re.captures_iter(x) {
                if let Some(m) = c.get(group) {
                    // Each piece costs a string header besides its bytes.
                    budget.add_bytes(m.len().saturating_add(32))?;
                    out.push(Value::String(m.as_str().to_string()));
                }
            }
            Val::Own(Value::Array(out))
        }
        RegexFn::Replace | RegexFn::ReplaceAll => {
            let Some(with) = a[2].as_str() else {
                return Ok(Val::Undef);
            };
            let limit = if f == RegexFn::Replace { 1 } else { 0 };
            // Bounded before it is built: each replaced match adds the replacement, whose
            // `$n` references add, over all matches, at most the text once each.
            let matches = re
                .find_iter(x)
                .take(if limit == 1 { 1 } else { usize::MAX });
            let refs = with.matches('$').count();
            let grows = matches
                .count()
                .saturating_mul(with.len())
                .saturating_add(refs.saturating_mul(x.len()));
            if grows > x.len() {
                SizeBudget::default().add_bytes(x.len().saturating_add(grows))?;
            }
            s(re.replacen(x, limit, with).into_owned())
        }
    })
}

/// `pattern` with `mods`; an invalid one is the query's error, naming the function.
fn compile(f: RegexFn, pattern: &str, mods: &str) -> R<::regex::Regex> {
    let name = match f {
        RegexFn::Match => "RegexMatch",
        RegexFn::Extract => "RegexExtract",
        RegexFn::ExtractAll => "RegexExtractAll",
        RegexFn::Replace => "RegexReplace",
        RegexFn::ReplaceAll => "RegexReplaceAll",
    };
    let mut builder = ::regex::RegexBuilder::new(pattern);
    for m in mods.chars() {
        match m {
            'i' => builder.case_insensitive(true),
            'm' => builder.multi_line(true),
            's' => builder.dot_matches_new_line(true),
            'x' => builder.ignore_whitespace(true),
            other => {
                return Err(QueryError::semantic(format!(
                    "Invalid {name} modifier '{other}': use i, m, s or x."
                )))
            }
        };
    }
    builder
        .build()
        .map_err(|e| QueryError::semantic(format!("Invalid regular expression in {name}: {e}")))
}

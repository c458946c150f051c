//! Tokens of Cosmos SQL, produced by sqlparser's tokenizer with a small dialect.
//!
//! The dialect makes `"..."` a string (not a quoted identifier), allows backslash escapes
//! (which we decode ourselves, JSON-style, including `\uXXXX`), and lets `$` start names.
//! sqlparser splits a few Cosmos operators, so they are re-joined here by adjacency:
//! `??` arrives as two `?`, `>>>` as `>>` `>`, `@name` as `@` `name`.

use super::error::{QueryError, Span};
use sqlparser::dialect::Dialect;
use sqlparser::tokenizer::{Token as SqlToken, Tokenizer};

#[derive(Debug)]
struct CosmosDialect;

impl Dialect for CosmosDialect {
    fn is_identifier_start(&self, ch: char) -> bool {
        ch.is_alphabetic() || ch == '_' || ch == '$'
    }
    fn is_identifier_part(&self, ch: char) -> bool {
        ch.is_alphanumeric() || ch == '_' || ch == '$'
    }
    fn is_delimited_identifier_start(&self, _ch: char) -> bool {
        false
    }
    fn supports_string_literal_backslash_escape(&self) -> bool {
        true
    }
}

/// Reserved words: they cannot be property names after `.` nor aliases.
pub const KEYWORDS: &[&str] = &[
    "AND",
    "ARRAY",
    "AS",
    "ASC",
    "BETWEEN",
    "BY",
    "DESC",
    "DISTINCT",
    "ESCAPE",
    "EXISTS",
    "FALSE",
    "FROM",
    "GROUP",
    "IN",
    "JOIN",
    "LIKE",
    "LIMIT",
    "NOT",
    "NULL",
    "OFFSET",
    "OR",
    "ORDER",
    "SELECT",
    "TOP",
    "TRUE",
    "UDF",
    "UNDEFINED",
    "VALUE",
    "WHERE",
];

#[derive(Debug, Clone, PartialEq)]
pub enum Tok {
    /// A name (not a reserved word), as written.
    Ident(String),
    /// A reserved word, uppercased.
    Kw(&'static str),
    Str(String),
    Num(f64),
    /// An integer literal beyond 2^53, exact.
    Int(i64),
    /// `@name`
    Param(String),
    Comma,
    Dot,
    LParen,
    RParen,
    LBracket,
    RBracket,
    LBrace,
    RBrace,
    Colon,
    Star,
    Plus,
    Minus,
    Slash,
    Percent,
    Eq,
    Neq,
    Lt,
    Gt,
    Le,
    Ge,
    Concat,
    Amp,
    Pipe,
    Caret,
    Tilde,
    Shl,
    Shr,
    ShrZero,
    Question,
    Coalesce,
    Eof,
}

impl Tok {
    /// How the token reads in an error message.
    pub fn describe(&self) -> String {
        match self {
            Tok::Ident(s) => s.clone(),
            Tok::Kw(k) => k.to_lowercase(),
            Tok::Str(s) => format!("\"{s}\""),
            Tok::Num(n) => n.to_string(),
            Tok::Int(i) => i.to_string(),
            Tok::Param(p) => format!("@{p}"),
            Tok::Eof => "end of query".into(),
            other => symbol(other).into(),
        }
    }
}

fn symbol(t: &Tok) -> &'static str {
    match t {
        Tok::Comma => ",",
        Tok::Dot => ".",
        Tok::LParen => "(",
        Tok::RParen => ")",
        Tok::LBracket => "[",
        Tok::RBracket => "]",
        Tok::LBrace => "{",
        Tok::RBrace => "}",
        Tok::Colon => ":",
        Tok::Star => "*",
        Tok::Plus => "+",
        Tok::Minus => "-",
        Tok::Slash => "/",
        Tok::Percent => "%",
        Tok::Eq => "=",
        Tok::Neq => "!=",
        Tok::Lt => "<",
        Tok::Gt => ">",
        Tok::Le => "<=",
        Tok::Ge => ">=",
        Tok::Concat => "||",
        Tok::Amp => "&",
        Tok::Pipe => "|",
        Tok::Caret => "^",
        Tok::Tilde => "~",
        Tok::Shl => "<<",
        Tok::Shr => ">>",
        Tok::ShrZero => ">>>",
        Tok::Question => "?",
        Tok::Coalesce => "??",
        _ => "?",
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Token {
    pub tok: Tok,
    pub span: Span,
}

fn keyword(word: &str) -> Option<&'static str> {
    KEYWORDS
        .iter()
        .find(|k| k.eq_ignore_ascii_case(word))
        .copied()
}

/// Splits a query into tokens (ending with `Eof`).
pub fn tokenize(sql: &str) -> Result<Vec<Token>, QueryError> {
    let raw = Tokenizer::new(&CosmosDialect, sql)
        .with_unescape(false)
        .tokenize_with_location()
        .map_err(|e| {
            QueryError::syntax(
                format!("Syntax error: {}.", e.message),
                Span {
                    line: e.location.line,
                    col: e.location.column,
                },
            )
        })?;
    let mut out: Vec<Token> = Vec::with_capacity(raw.len());
    let mut prev_end = (0u64, 0u64);
    for t in raw {
        let span = Span {
            line: t.span.start.line,
            col: t.span.start.column,
        };
        let adjacent = prev_end == (t.span.start.line, t.span.start.column);
        let end = (t.span.end.line, t.span.end.column);
        let tok = match t.token {
            SqlToken::Whitespace(_) => continue,
            SqlToken::EOF => break,
            SqlToken::Word(w) => {
                if w.quote_style.is_some() {
                    return Err(QueryError::syntax(
                        format!("Syntax error, incorrect syntax near '{}'.", w.value),
                        span,
                    ));
                }
                // `@name` is `@` followed by a word.
                if adjacent
                    && matches!(out.last(), Some(Token { tok: Tok::Param(p), .. }) if p.is_empty())
                {
                    if let Some(Token {
                        tok: Tok::Param(p), ..
                    }) = out.last_mut()
                    {
                        *p = w.value;
                    }
                    prev_end = end;
                    continue;
                }
                match keyword(&w.value) {
                    Some(k) => Tok::Kw(k),
                    None => Tok::Ident(w.value),
                }
            }
            SqlToken::Number(n, _) => match n.parse::<i64>() {
                // Past 2^53 a double cannot hold every integer: kept exact.
                Ok(i) if i.unsigned_abs() >= 1 << 53 => Tok::Int(i),
                _ => Tok::Num(n.parse().map_err(|_| {
                    QueryError::syntax(format!("The number '{n}' is not valid."), span)
                })?),
            },
            SqlToken::SingleQuotedString(s) | SqlToken::DoubleQuotedString(s) => {
                Tok::Str(unescape(&s).map_err(|m| QueryError::syntax(m, span))?)
            }
            SqlToken::AtSign => Tok::Param(String::new()),
            SqlToken::Placeholder(p) if p == "?" => {
                if adjacent
                    && matches!(
                        out.last(),
                        Some(Token {
                            tok: Tok::Question,
                            ..
                        })
                    )
                {
                    if let Some(last) = out.last_mut() {
                        last.tok = Tok::Coalesce;
                    }
                    prev_end = end;
                    continue;
                }
                Tok::Question
            }
            SqlToken::Gt => {
                if adjacent && matches!(out.last(), Some(Token { tok: Tok::Shr, .. })) {
                    if let Some(last) = out.last_mut() {
                        last.tok = Tok::ShrZero;
                    }
                    prev_end = end;
                    continue;
                }
                Tok::Gt
            }
            other => match punctuation(&other) {
                Some(tok) => tok,
                None => {
                    return Err(QueryError::syntax(
                        format!("Syntax error, incorrect syntax near '{other}'."),
                        span,
                    ))
                }
            },
        };
        named_param(&out)?;
        prev_end = end;
        out.push(Token { tok, span });
    }
    named_param(&out)?;
    let end = Span {
        line: prev_end.0.max(1),
        col: prev_end.1.max(1),
    };
    out.push(Token {
        tok: Tok::Eof,
        span: end,
    });
    Ok(out)
}

/// The token of a one-for-one operator or punctuation mark.
fn punctuation(t: &SqlToken) -> Option<Tok> {
    Some(match t {
        SqlToken::Comma => Tok::Comma,
        SqlToken::Period => Tok::Dot,
        SqlToken::LParen => Tok::LParen,
        SqlToken::RParen => Tok::RParen,
        SqlToken::LBracket => Tok::LBracket,
        SqlToken::RBracket => Tok::RBracket,
        SqlToken::LBrace => Tok::LBrace,
        SqlToken::RBrace => Tok::RBrace,
        SqlToken::Colon => Tok::Colon,
        SqlToken::Mul => Tok::Star,
        SqlToken::Plus => Tok::Plus,
        SqlToken::Minus => Tok::Minus,
        SqlToken::Div => Tok::Slash,
        SqlToken::Mod => Tok::Percent,
        SqlToken::Eq => Tok::Eq,
        SqlToken::Neq => Tok::Neq,
        SqlToken::Lt => Tok::Lt,
        SqlToken::LtEq => Tok::Le,
        SqlToken::GtEq => Tok::Ge,
        SqlToken::StringConcat => Tok::Concat,
        SqlToken::Ampersand => Tok::Amp,
        SqlToken::Pipe => Tok::Pipe,
        SqlToken::Caret => Tok::Caret,
        SqlToken::Tilde => Tok::Tilde,
        SqlToken::ShiftLeft => Tok::Shl,
        SqlToken::ShiftRight => Tok::Shr,
        _ => return None,
    })
}

/// A parameter is `@` and a name: the last token may not be a bare `@`.
fn named_param(out: &[Token]) -> Result<(), QueryError> {
    match out.last() {
        Some(Token {
            tok: Tok::Param(p),
            span,
        }) if p.is_empty() => Err(QueryError::syntax(
            "Syntax error: '@' must be followed by a parameter name.",
            *span,
        )),
        _ => Ok(()),
    }
}

/// Decodes backslash escapes, JSON style (`\uXXXX` with surrogate pairs).
fn unescape(s: &str) -> Result<String, String> {
    if !s.contains('\\') {
        return Ok(s.to_string());
    }
    let mut out = String::with_capacity(s.len());
    let mut it = s.chars();
    while let Some(c) = it.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match it.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('b') => out.push('\u{8}'),
            Some('f') => out.push('\u{c}'),
            Some('u') => {
                let hex: String = it.by_ref().take(4).collect();
                let unit = u16::from_str_radix(&hex, 16)
                    .map_err(|_| format!("The escape '\\u{hex}' is not valid."))?;
                if (0xD800..0xDC00).contains(&unit) {
                    // A high surrogate must be followed by a low one.
                    let rest: String = it.clone().take(6).collect();
                    if let Some(lo) = rest
                        .strip_prefix("\\u")
                        .and_then(|h| u16::from_str_radix(h, 16).ok())
                        .filter(|lo| (0xDC00..0xE000).contains(lo))
                    {
                        for _ in 0..6 {
                            it.next();
                        }
                        let cp = 0x10000 + (((unit as u32) - 0xD800) << 10) + (lo as u32 - 0xDC00);
                        out.push(char::from_u32(cp).unwrap_or('\u{FFFD}'));
                    } else {
                        out.push('\u{FFFD}');
                    }
                } else {
                    out.push(char::from_u32(unit as u32).unwrap_or('\u{FFFD}'));
                }
            }
            Some(other) => out.push(other),
            None => return Err("A string ends with an unfinished escape '\\'.".into()),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(s: &str) -> Vec<Tok> {
        tokenize(s).unwrap().into_iter().map(|t| t.tok).collect()
    }

    #[test]
    fn joins_split_operators() {
        assert_eq!(
            toks("a ?? b ? c : d >>> 1 >> 2 @p"),
            vec![
                Tok::Ident("a".into()),
                Tok::Coalesce,
                Tok::Ident("b".into()),
                Tok::Question,
                Tok::Ident("c".into()),
                Tok::Colon,
                Tok::Ident("d".into()),
                Tok::ShrZero,
                Tok::Num(1.0),
                Tok::Shr,
                Tok::Num(2.0),
                Tok::Param("p".into()),
                Tok::Eof
            ]
        );
        assert_eq!(toks("a ? ? b")[1..3], [Tok::Question, Tok::Question]);
    }

    #[test]
    fn strings_and_keywords() {
        assert_eq!(
            toks(r#"SELECT value "a\"b\u00e9\n" 'x'"#),
            vec![
                Tok::Kw("SELECT"),
                Tok::Kw("VALUE"),
                Tok::Str("a\"bé\n".into()),
                Tok::Str("x".into()),
                Tok::Eof
            ]
        );
        assert_eq!(toks(r#""\ud83d\ude00""#)[0], Tok::Str("😀".into()));
        assert!(tokenize("a == b").is_err());
        assert!(tokenize("@ x").is_err());
    }
}

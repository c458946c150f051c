//! A recursive-descent parser from tokens to [`Query`].
//!
//! Precedence, lowest first: `?:`, `??`, `OR`, `AND`, `NOT`, comparisons with `IN`, `BETWEEN`
//! and `LIKE`, `|`, `^`, `&`, shifts, `+ - ||`, `* / %`, unary `- + ~`, then member and index
//! access on primaries.

use super::ast::*;
use super::error::{QueryError, Span};
use super::lexer::{tokenize, Tok, Token};
use super::limits::{MAX_DEPTH, MAX_IN_LIST, MAX_JOINS, MAX_QUERY_BYTES};
use serde_json::Value;

mod expr;

/// Parses a complete query.
pub fn parse(sql: &str) -> Result<Query, QueryError> {
    let mut p = Parser::new(sql)?;
    let q = p.query()?;
    p.expect_eof()?;
    Ok(q)
}

/// Parses a standalone expression (e.g. a patch condition's WHERE part).
pub fn parse_expr(sql: &str) -> Result<Expr, QueryError> {
    let mut p = Parser::new(sql)?;
    let e = p.expr()?;
    p.expect_eof()?;
    Ok(e)
}

/// The parser recurses once per nesting level of the text, so `depth` (the levels open now)
/// is bounded by [`MAX_DEPTH`]: deeper text is a 400, never a stack overflow. Chains of
/// binary operators do not recurse while parsing but build a tree one level deeper per term,
/// which every later pass walks recursively, so they count against the same bound; `AND` and
/// `OR` chains (generated filters of thousands of terms are common) are built balanced
/// instead, which their associativity allows.
struct Parser {
    /// The text, for echoing a keyword as written in an error.
    sql: String,
    tokens: Vec<Token>,
    pos: usize,
    depth: usize,
}

type R<T> = Result<T, QueryError>;

impl Parser {
    fn new(sql: &str) -> R<Self> {
        if sql.len() > MAX_QUERY_BYTES {
            return Err(QueryError::semantic(format!(
                "The SQL query text is {} bytes long, which exceeds the maximum allowed length of {MAX_QUERY_BYTES} bytes (512 KB).",
                sql.len()
            )));
        }
        Ok(Parser {
            sql: sql.to_string(),
            tokens: tokenize(sql)?,
            pos: 0,
            depth: 0,
        })
    }

    /// Opens one nesting level; an error past [`MAX_DEPTH`].
    fn enter(&mut self) -> R<()> {
        self.depth += 1;
        self.check_depth(0)
    }

    fn leave(&mut self) {
        self.depth -= 1;
    }

    /// Runs `f` one nesting level deeper.
    fn nested<T>(&mut self, f: impl FnOnce(&mut Self) -> R<T>) -> R<T> {
        self.enter()?;
        let out = super::limits::deep(|| f(self));
        self.leave();
        out
    }

    /// Checks the open levels plus `extra` (the terms of an operator chain so far).
    fn check_depth(&self, extra: usize) -> R<()> {
        if self.depth + extra > MAX_DEPTH {
            return Err(QueryError::syntax(
                format!(
                    "The SQL query is nested too deeply: expressions may nest at most {MAX_DEPTH} levels (parentheses, NOT, unary operators, function calls, array and object literals, subqueries, property paths and chains of operators other than AND/OR each count one level)."
                ),
                self.span(),
            ));
        }
        Ok(())
    }

    /// Parses `sub (op sub)*` for an associative operator into a balanced tree.
    fn balanced_chain(&mut self, kw: &str, op: BinOp, sub: fn(&mut Self) -> R<Expr>) -> R<Expr> {
        let mut terms = vec![sub(self)?];
        while self.eat_kw(kw) {
            terms.push(sub(self)?);
        }
        Ok(balance(op, terms))
    }
    fn peek(&self) -> &Tok {
        &self.tokens[self.pos].tok
    }

    fn peek_at(&self, n: usize) -> &Tok {
        let i = (self.pos + n).min(self.tokens.len() - 1);
        &self.tokens[i].tok
    }

    fn span(&self) -> Span {
        self.tokens[self.pos].span
    }

    fn bump(&mut self) -> Tok {
        let t = self.tokens[self.pos].tok.clone();
        if self.pos < self.tokens.len() - 1 {
            self.pos += 1;
        }
        t
    }

    fn error_here<T>(&self) -> R<T> {
        let t = &self.tokens[self.pos];
        Err(QueryError::syntax(
            format!("Syntax error, incorrect syntax near '{}'.", self.written(t)),
            t.span,
        ))
    }

    /// A token as an error names it: a keyword as the text wrote it (`FROM`, `from`), as the
    /// service echoes it.
    fn written(&self, t: &Token) -> String {
        if let Tok::Kw(k) = &t.tok {
            let line = self.sql.lines().nth(t.span.line.saturating_sub(1) as usize);
            if let Some(line) = line {
                let w: String = line
                    .chars()
                    .skip(t.span.col.saturating_sub(1) as usize)
                    .take(k.chars().count())
                    .collect();
                if w.eq_ignore_ascii_case(k) {
                    return w;
                }
            }
        }
        t.tok.describe()
    }

    fn eat(&mut self, t: &Tok) -> bool {
        if self.peek() == t {
            self.bump();
            true
        } else {
            false
        }
    }

    fn eat_kw(&mut self, kw: &str) -> bool {
        if matches!(self.peek(), Tok::Kw(k) if *k == kw) {
            self.bump();
            true
        } else {
            false
        }
    }

    fn is_kw(&self, kw: &str) -> bool {
        matches!(self.peek(), Tok::Kw(k) if *k == kw)
    }

    fn expect(&mut self, t: &Tok) -> R<()> {
        if self.eat(t) {
            Ok(())
        } else {
            self.error_here()
        }
    }

    fn expect_kw(&mut self, kw: &str) -> R<()> {
        if self.eat_kw(kw) {
            Ok(())
        } else {
            self.error_here()
        }
    }

    fn expect_eof(&mut self) -> R<()> {
        if matches!(self.peek(), Tok::Eof) {
            Ok(())
        } else {
            self.error_here()
        }
    }

    /// A name that is not a reserved word (aliases, property names after `.`).
    fn ident(&mut self) -> R<String> {
        match self.peek().clone() {
            Tok::Ident(s) => {
                self.bump();
                Ok(s)
            }
            _ => self.error_here(),
        }
    }

    // ---- query --------------------------------------------------------------------------

    fn query(&mut self) -> R<Query> {
        self.nested(Self::query_inner)
    }

    fn query_inner(&mut self) -> R<Query> {
        self.expect_kw("SELECT")?;
        let mut distinct = false;
        let mut top = None;
        loop {
            if !distinct && self.eat_kw("DISTINCT") {
                distinct = true;
            } else if top.is_none() && self.eat_kw("TOP") {
                top = Some(self.top_operand()?);
            } else {
                break;
            }
        }
        let projection = if self.eat(&Tok::Star) {
            Projection::Star
        } else if self.eat_kw("VALUE") {
            if matches!(self.peek(), Tok::Star) {
                return self.error_here();
            }
            Projection::Value(self.expr()?)
        } else {
            let mut items = Vec::new();
            loop {
                let expr = self.expr()?;
                let alias = if self.eat_kw("AS") {
                    Some(self.ident()?)
                } else if let Tok::Ident(s) = self.peek().clone() {
                    self.bump();
                    Some(s)
                } else {
                    None
                };
                items.push(SelectItem { expr, alias });
                if !self.eat(&Tok::Comma) {
                    break;
                }
            }
            Projection::List(items)
        };
        let from = if self.eat_kw("FROM") {
            let first = self.source()?;
            let mut joins = Vec::new();
            while self.eat_kw("JOIN") {
                if joins.len() == MAX_JOINS {
                    return Err(QueryError::syntax(
                        format!(
                            "A query may have at most {MAX_JOINS} JOINs (the service's limit)."
                        ),
                        self.span(),
                    ));
                }
                joins.push(self.source()?);
            }
            Some(From { first, joins })
        } else {
            None
        };
        let where_ = if self.eat_kw("WHERE") {
            Some(self.expr()?)
        } else {
            None
        };
        let mut group_by = Vec::new();
        if self.eat_kw("GROUP") {
            self.expect_kw("BY")?;
            loop {
                group_by.push(self.expr()?);
                if !self.eat(&Tok::Comma) {
                    break;
                }
            }
        }
        let order_by = match self.eat_kw("ORDER") {
            true => Some(self.order_by()?),
            false => None,
        };
        let (mut offset, mut limit) = (None, None);
        if self.eat_kw("OFFSET") {
            offset = Some(self.top_operand()?);
            self.expect_kw("LIMIT")?;
            limit = Some(self.top_operand()?);
        } else if self.is_kw("LIMIT") {
            return Err(QueryError::syntax(
                "Syntax error: LIMIT must follow OFFSET (write OFFSET 0 LIMIT n).",
                self.span(),
            ));
        }
        Ok(Query {
            select: Select {
                distinct,
                top,
                projection,
            },
            from,
            where_,
            group_by,
            order_by,
            offset,
            limit,
            aggregates: Vec::new(),
        })
    }

    /// What follows `ORDER`: `BY RANK expr` (full-text scoring) or `BY` sort items, each
    /// `ASC` (the default) or `DESC`.
    fn order_by(&mut self) -> R<OrderBy> {
        self.expect_kw("BY")?;
        if matches!(self.peek(), Tok::Ident(s) if s.eq_ignore_ascii_case("RANK"))
            && !matches!(
                self.peek_at(1),
                Tok::Dot | Tok::LBracket | Tok::Comma | Tok::Eof
            )
        {
            self.bump();
            let e = self.expr()?;
            if self.is_kw("ASC") || self.is_kw("DESC") {
                return Err(QueryError::semantic(
                    "Specifying a sort order (ASC or DESC) in the ORDER BY RANK clause is not allowed.",
                ));
            }
            Ok(OrderBy::Rank(e))
        } else {
            let mut items = Vec::new();
            loop {
                let expr = self.expr()?;
                let (descending, direction_given) = if self.eat_kw("DESC") {
                    (true, true)
                } else {
                    (false, self.eat_kw("ASC"))
                };
                items.push(OrderItem {
                    expr,
                    descending,
                    direction_given,
                });
                if !self.eat(&Tok::Comma) {
                    break;
                }
            }
            Ok(OrderBy::Items(items))
        }
    }

    /// `TOP`, `OFFSET` and `LIMIT` take a number or a parameter.
    fn top_operand(&mut self) -> R<Expr> {
        match self.peek().clone() {
            Tok::Num(n) => {
                self.bump();
                Ok(Expr::Lit(num(n)))
            }
            Tok::Int(i) => {
                self.bump();
                Ok(Expr::Lit(Value::from(i)))
            }
            Tok::Param(p) => {
                self.bump();
                Ok(Expr::Param(p))
            }
            _ => self.error_here(),
        }
    }

    fn source(&mut self) -> R<Source> {
        // `alias IN expr`
        if let (Tok::Ident(name), Tok::Kw("IN")) = (self.peek().clone(), self.peek_at(1).clone()) {
            self.bump();
            self.bump();
            let expr = self.postfix_expr()?;
            return Ok(Source {
                kind: SourceKind::Iterate(expr),
                alias: Some(name),
                slot: 0,
            });
        }
        if matches!(self.peek(), Tok::LParen) && matches!(self.peek_at(1), Tok::Kw("SELECT")) {
            self.bump();
            let q = self.query()?;
            self.expect(&Tok::RParen)?;
            let alias = self.optional_alias()?;
            return Ok(Source {
                kind: SourceKind::Subquery(Box::new(q)),
                alias,
                slot: 0,
            });
        }
        let root = self.ident()?;
        let mut expr = Expr::Ident(root.clone());
        let mut plain = true;
        let mut terms = 0;
        loop {
            match self.peek() {
                Tok::Dot => {
                    self.bump();
                    terms += 1;
                    self.check_depth(terms)?;
                    let name = self.member_name()?;
                    expr = Expr::Member(expr.boxed(), name);
                    plain = false;
                }
                Tok::LBracket => {
                    self.bump();
                    terms += 1;
                    self.check_depth(terms)?;
                    let idx = self.expr()?;
                    self.expect(&Tok::RBracket)?;
                    expr = Expr::Index(expr.boxed(), idx.boxed());
                    plain = false;
                }
                _ => break,
            }
        }
        let alias = self.optional_alias()?;
        let alias = match (alias, plain) {
            (Some(a), _) => Some(a),
            (None, true) => Some(root),
            (None, false) => match &expr {
                Expr::Member(_, n) => Some(n.clone()),
                _ => None,
            },
        };
        Ok(Source {
            kind: SourceKind::Value(expr),
            alias,
            slot: 0,
        })
    }

    fn optional_alias(&mut self) -> R<Option<String>> {
        if self.eat_kw("AS") {
            return Ok(Some(self.ident()?));
        }
        if let Tok::Ident(s) = self.peek().clone() {
            self.bump();
            return Ok(Some(s));
        }
        Ok(None)
    }

    /// A property name after `.`: any name that is not a reserved word.
    fn member_name(&mut self) -> R<String> {
        match self.peek().clone() {
            Tok::Ident(s) => {
                self.bump();
                Ok(s)
            }
            _ => self.error_here(),
        }
    }

    fn paren_query(&mut self) -> R<Query> {
        self.expect(&Tok::LParen)?;
        let q = self.query()?;
        self.expect(&Tok::RParen)?;
        Ok(q)
    }

    fn call_args(&mut self) -> R<Vec<Expr>> {
        self.expect(&Tok::LParen)?;
        self.expr_list(&Tok::RParen)
    }

    /// Comma-separated expressions up to and including `close` (the opening token is
    /// already consumed); empty when `close` comes first.
    fn expr_list(&mut self, close: &Tok) -> R<Vec<Expr>> {
        let mut items = Vec::new();
        if self.peek() != close {
            loop {
                items.push(self.expr()?);
                if !self.eat(&Tok::Comma) {
                    break;
                }
            }
        }
        self.expect(close)?;
        Ok(items)
    }
}

/// Builds `t0 op t1 op … tn` as a balanced tree: depth log2(n) instead of n. Only for
/// associative operators (`AND`, `OR`), where the shape does not change the value.
fn balance(op: BinOp, mut terms: Vec<Expr>) -> Expr {
    if terms.len() == 1 {
        return terms.pop().unwrap_or(Expr::Undefined);
    }
    let right = terms.split_off(terms.len().div_ceil(2));
    Expr::Binary(op, balance(op, terms).boxed(), balance(op, right).boxed())
}

/// A JSON number, as an integer when it is one.
pub fn num(n: f64) -> Value {
    crate::pk::number_to_json(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints() {
        let q = parse("SELECT VALUE c.a FROM c WHERE c.b = @x AND NOT c.c").unwrap();
        assert_eq!(
            q.to_string(),
            "SELECT VALUE c.a FROM c WHERE ((c.b = @x) AND (NOT c.c))"
        );
        let q = parse(
            r#"SELECT c["value"], c.x ?? 1 AS y FROM root c ORDER BY c.x DESC OFFSET 1 LIMIT 2"#,
        )
        .unwrap();
        assert!(matches!(q.order_by, Some(OrderBy::Items(ref v)) if v[0].descending));
        assert_eq!(q.from.unwrap().first.alias.as_deref(), Some("c"));
    }

    #[test]
    fn precedence() {
        let e = parse_expr("1 + 2 * 3 = 7 AND true OR false").unwrap();
        assert_eq!(e.to_string(), "((((1 + (2 * 3)) = 7) AND true) OR false)");
        let e = parse_expr("a ? b : c ? d : e").unwrap();
        assert_eq!(e.to_string(), "(a ? b : (c ? d : e))");
        let e = parse_expr("x BETWEEN 1 AND 2 AND y").unwrap();
        assert_eq!(e.to_string(), "((x BETWEEN 1 AND 2) AND y)");
        let e = parse_expr("-1").unwrap();
        assert_eq!(e, Expr::Lit(Value::from(-1)));
    }

    #[test]
    fn rejects_cosmos_invalid() {
        for bad in [
            "SELECT c.value FROM c",
            "SELECT c.id as value FROM c",
            "SELECT VALUE * FROM c",
            "SELECT *, c.id FROM c",
            "SELECT * FROM c WHERE c.a IS NULL",
            "SELECT * FROM c WHERE c.a == 1",
            "SELECT * FROM c LIMIT 1",
            "SELECT",
            "SELECT * FROM c WHERE",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}

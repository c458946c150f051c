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
            format!(
                "Syntax error, incorrect syntax near '{}'.",
                t.tok.describe()
            ),
            t.span,
        ))
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
        let mut order_by = None;
        if self.eat_kw("ORDER") {
            self.expect_kw("BY")?;
            if matches!(self.peek(), Tok::Ident(s) if s.eq_ignore_ascii_case("RANK"))
                && !matches!(
                    self.peek_at(1),
                    Tok::Dot | Tok::LBracket | Tok::Comma | Tok::Eof
                )
            {
                self.bump();
                order_by = Some(OrderBy::Rank(self.expr()?));
            } else {
                let mut items = Vec::new();
                loop {
                    let expr = self.expr()?;
                    let descending = if self.eat_kw("DESC") {
                        true
                    } else {
                        self.eat_kw("ASC");
                        false
                    };
                    items.push(OrderItem { expr, descending });
                    if !self.eat(&Tok::Comma) {
                        break;
                    }
                }
                order_by = Some(OrderBy::Items(items));
            }
        }
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

    /// `TOP`, `OFFSET` and `LIMIT` take a number or a parameter.
    fn top_operand(&mut self) -> R<Expr> {
        match self.peek().clone() {
            Tok::Num(n) => {
                self.bump();
                Ok(Expr::Lit(num(n)))
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

    // ---- expressions -----------------------------------------------------------------------

    pub fn expr(&mut self) -> R<Expr> {
        self.nested(Self::expr_inner)
    }

    fn expr_inner(&mut self) -> R<Expr> {
        let cond = self.coalesce()?;
        if self.eat(&Tok::Question) {
            let a = self.expr()?;
            self.expect(&Tok::Colon)?;
            let b = self.expr()?;
            return Ok(Expr::Ternary(cond.boxed(), a.boxed(), b.boxed()));
        }
        Ok(cond)
    }

    fn coalesce(&mut self) -> R<Expr> {
        let left = self.or()?;
        if self.eat(&Tok::Coalesce) {
            let right = self.nested(Self::coalesce)?;
            return Ok(Expr::Coalesce(left.boxed(), right.boxed()));
        }
        Ok(left)
    }

    fn or(&mut self) -> R<Expr> {
        self.balanced_chain("OR", BinOp::Or, Self::and)
    }

    fn and(&mut self) -> R<Expr> {
        self.balanced_chain("AND", BinOp::And, Self::not)
    }

    fn not(&mut self) -> R<Expr> {
        if self.eat_kw("NOT") {
            let e = self.nested(Self::not)?;
            return Ok(Expr::Unary(UnOp::Not, e.boxed()));
        }
        self.comparison()
    }

    fn comparison(&mut self) -> R<Expr> {
        let mut left = self.bit_or()?;
        let mut terms = 0;
        loop {
            let op = match self.peek() {
                Tok::Eq => BinOp::Eq,
                Tok::Neq => BinOp::Neq,
                Tok::Lt => BinOp::Lt,
                Tok::Gt => BinOp::Gt,
                Tok::Le => BinOp::Le,
                Tok::Ge => BinOp::Ge,
                Tok::Kw("NOT") if matches!(self.peek_at(1), Tok::Kw("IN" | "BETWEEN" | "LIKE")) => {
                    self.bump();
                    terms += 1;
                    self.check_depth(terms)?;
                    left = self.special(left, true)?;
                    continue;
                }
                Tok::Kw("IN" | "BETWEEN" | "LIKE") => {
                    terms += 1;
                    self.check_depth(terms)?;
                    left = self.special(left, false)?;
                    continue;
                }
                _ => return Ok(left),
            };
            self.bump();
            terms += 1;
            self.check_depth(terms)?;
            let right = self.bit_or()?;
            left = Expr::Binary(op, left.boxed(), right.boxed());
        }
    }

    /// `IN (...)`, `BETWEEN a AND b`, `LIKE p [ESCAPE e]`, after an optional NOT.
    fn special(&mut self, left: Expr, negated: bool) -> R<Expr> {
        match self.bump() {
            Tok::Kw("IN") => {
                self.expect(&Tok::LParen)?;
                let mut list = Vec::new();
                if !matches!(self.peek(), Tok::RParen) {
                    loop {
                        if list.len() == MAX_IN_LIST {
                            return Err(QueryError::syntax(
                                format!("An IN list may hold at most {MAX_IN_LIST} values; pass a larger set as an array parameter and use ARRAY_CONTAINS."),
                                self.span(),
                            ));
                        }
                        list.push(self.expr()?);
                        if !self.eat(&Tok::Comma) {
                            break;
                        }
                    }
                }
                self.expect(&Tok::RParen)?;
                Ok(Expr::In {
                    expr: left.boxed(),
                    list,
                    negated,
                })
            }
            Tok::Kw("BETWEEN") => {
                let low = self.bit_or()?;
                self.expect_kw("AND")?;
                let high = self.bit_or()?;
                Ok(Expr::Between {
                    expr: left.boxed(),
                    low: low.boxed(),
                    high: high.boxed(),
                    negated,
                })
            }
            _ => {
                let pattern = self.bit_or()?;
                let escape = if self.eat_kw("ESCAPE") {
                    Some(self.bit_or()?.boxed())
                } else {
                    None
                };
                Ok(Expr::Like {
                    expr: left.boxed(),
                    pattern: pattern.boxed(),
                    escape,
                    negated,
                })
            }
        }
    }

    fn bit_or(&mut self) -> R<Expr> {
        let mut left = self.bit_xor()?;
        let mut terms = 0;
        while self.eat(&Tok::Pipe) {
            terms += 1;
            self.check_depth(terms)?;
            let right = self.bit_xor()?;
            left = Expr::Binary(BinOp::BitOr, left.boxed(), right.boxed());
        }
        Ok(left)
    }

    fn bit_xor(&mut self) -> R<Expr> {
        let mut left = self.bit_and()?;
        let mut terms = 0;
        while self.eat(&Tok::Caret) {
            terms += 1;
            self.check_depth(terms)?;
            let right = self.bit_and()?;
            left = Expr::Binary(BinOp::BitXor, left.boxed(), right.boxed());
        }
        Ok(left)
    }

    fn bit_and(&mut self) -> R<Expr> {
        let mut left = self.shift()?;
        let mut terms = 0;
        while self.eat(&Tok::Amp) {
            terms += 1;
            self.check_depth(terms)?;
            let right = self.shift()?;
            left = Expr::Binary(BinOp::BitAnd, left.boxed(), right.boxed());
        }
        Ok(left)
    }

    fn shift(&mut self) -> R<Expr> {
        let mut left = self.additive()?;
        let mut terms = 0;
        loop {
            let op = match self.peek() {
                Tok::Shl => BinOp::Shl,
                Tok::Shr => BinOp::Shr,
                Tok::ShrZero => BinOp::ShrZero,
                _ => return Ok(left),
            };
            self.bump();
            terms += 1;
            self.check_depth(terms)?;
            let right = self.additive()?;
            left = Expr::Binary(op, left.boxed(), right.boxed());
        }
    }

    fn additive(&mut self) -> R<Expr> {
        let mut left = self.multiplicative()?;
        let mut terms = 0;
        loop {
            let op = match self.peek() {
                Tok::Plus => BinOp::Add,
                Tok::Minus => BinOp::Sub,
                Tok::Concat => BinOp::Concat,
                _ => return Ok(left),
            };
            self.bump();
            terms += 1;
            self.check_depth(terms)?;
            let right = self.multiplicative()?;
            left = Expr::Binary(op, left.boxed(), right.boxed());
        }
    }

    fn multiplicative(&mut self) -> R<Expr> {
        let mut left = self.unary()?;
        let mut terms = 0;
        loop {
            let op = match self.peek() {
                Tok::Star => BinOp::Mul,
                Tok::Slash => BinOp::Div,
                Tok::Percent => BinOp::Mod,
                _ => return Ok(left),
            };
            self.bump();
            terms += 1;
            self.check_depth(terms)?;
            let right = self.unary()?;
            left = Expr::Binary(op, left.boxed(), right.boxed());
        }
    }

    fn unary(&mut self) -> R<Expr> {
        let op = match self.peek() {
            Tok::Minus => UnOp::Neg,
            Tok::Plus => UnOp::Plus,
            Tok::Tilde => UnOp::BitNot,
            _ => return self.postfix_expr(),
        };
        self.bump();
        let e = self.nested(Self::unary)?;
        // Fold negative number literals so `-1` is a constant.
        if let (UnOp::Neg, Expr::Lit(Value::Number(n))) = (op, &e) {
            if let Some(f) = n.as_f64() {
                return Ok(Expr::Lit(num(-f)));
            }
        }
        Ok(Expr::Unary(op, e.boxed()))
    }

    fn postfix_expr(&mut self) -> R<Expr> {
        let mut e = self.primary()?;
        let mut terms = 0;
        loop {
            match self.peek() {
                Tok::Dot => {
                    self.bump();
                    terms += 1;
                    self.check_depth(terms)?;
                    let name = self.member_name()?;
                    e = Expr::Member(e.boxed(), name);
                }
                Tok::LBracket => {
                    self.bump();
                    terms += 1;
                    self.check_depth(terms)?;
                    let idx = self.expr()?;
                    self.expect(&Tok::RBracket)?;
                    e = match idx {
                        Expr::Lit(Value::String(s)) => Expr::Member(e.boxed(), s),
                        other => Expr::Index(e.boxed(), other.boxed()),
                    };
                }
                _ => return Ok(e),
            }
        }
    }

    fn primary(&mut self) -> R<Expr> {
        let span = self.span();
        match self.peek().clone() {
            Tok::Num(n) => {
                self.bump();
                Ok(Expr::Lit(num(n)))
            }
            Tok::Str(s) => {
                self.bump();
                Ok(Expr::Lit(Value::String(s)))
            }
            Tok::Param(p) => {
                self.bump();
                Ok(Expr::Param(p))
            }
            Tok::Kw("TRUE") => {
                self.bump();
                Ok(Expr::Lit(Value::Bool(true)))
            }
            Tok::Kw("FALSE") => {
                self.bump();
                Ok(Expr::Lit(Value::Bool(false)))
            }
            Tok::Kw("NULL") => {
                self.bump();
                Ok(Expr::Lit(Value::Null))
            }
            Tok::Kw("UNDEFINED") => {
                self.bump();
                Ok(Expr::Undefined)
            }
            Tok::Kw("EXISTS") => {
                self.bump();
                Ok(Expr::Exists(Box::new(self.paren_query()?)))
            }
            Tok::Kw("ARRAY") => {
                self.bump();
                Ok(Expr::ArraySub(Box::new(self.paren_query()?)))
            }
            Tok::Kw("UDF") => {
                self.bump();
                self.expect(&Tok::Dot)?;
                let name = self.ident()?;
                let args = self.call_args()?;
                Ok(Expr::Udf(name, args))
            }
            Tok::LParen => {
                if matches!(self.peek_at(1), Tok::Kw("SELECT")) {
                    return Ok(Expr::Scalar(Box::new(self.paren_query()?)));
                }
                self.bump();
                let e = self.expr()?;
                self.expect(&Tok::RParen)?;
                Ok(e)
            }
            Tok::LBracket => {
                self.bump();
                let mut items = Vec::new();
                if !matches!(self.peek(), Tok::RBracket) {
                    loop {
                        items.push(self.expr()?);
                        if !self.eat(&Tok::Comma) {
                            break;
                        }
                    }
                }
                self.expect(&Tok::RBracket)?;
                Ok(Expr::Array(items))
            }
            Tok::LBrace => {
                self.bump();
                let mut props = Vec::new();
                if !matches!(self.peek(), Tok::RBrace) {
                    loop {
                        let key = match self.bump() {
                            Tok::Ident(s) | Tok::Str(s) => s,
                            _ => {
                                self.pos -= 1;
                                return self.error_here();
                            }
                        };
                        self.expect(&Tok::Colon)?;
                        let v = self.expr()?;
                        props.push((key, v));
                        if !self.eat(&Tok::Comma) {
                            break;
                        }
                    }
                }
                self.expect(&Tok::RBrace)?;
                Ok(Expr::Object(props))
            }
            Tok::Ident(name) => {
                self.bump();
                if matches!(self.peek(), Tok::LParen) {
                    let args = self.call_args()?;
                    let upper = name.to_ascii_uppercase();
                    if let Some(func) = AggFunc::from_name(&upper) {
                        if args.len() != 1 {
                            return Err(QueryError::syntax(
                                format!(
                                    "The aggregate function {upper} takes exactly one argument."
                                ),
                                span,
                            ));
                        }
                        let arg = args.into_iter().next().unwrap_or(Expr::Undefined);
                        return Ok(Expr::Agg {
                            func,
                            arg: arg.boxed(),
                            index: 0,
                        });
                    }
                    return match super::functions::Func::lookup(&upper) {
                        Some(func) => Ok(Expr::Call(func, args)),
                        None => Err(super::functions::unknown(&upper)),
                    };
                }
                Ok(Expr::Ident(name))
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
        let mut args = Vec::new();
        if !matches!(self.peek(), Tok::RParen) {
            loop {
                args.push(self.expr()?);
                if !self.eat(&Tok::Comma) {
                    break;
                }
            }
        }
        self.expect(&Tok::RParen)?;
        Ok(args)
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

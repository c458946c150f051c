//! The expression grammar, by precedence level (lowest first; see the parser's module
//! documentation), down to primaries, literals and calls.

use super::*;

impl Parser {
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
            if let Some(i) = n.as_i64().filter(|i| i.unsigned_abs() >= 1 << 53) {
                return Ok(Expr::Lit(Value::from(-i)));
            }
            if let Some(f) = n.as_f64() {
                return Ok(Expr::Lit(num(-f)));
            }
        }
        Ok(Expr::Unary(op, e.boxed()))
    }

    pub(super) fn postfix_expr(&mut self) -> R<Expr> {
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
            Tok::Int(i) => {
                self.bump();
                Ok(Expr::Lit(Value::from(i)))
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
                Ok(Expr::Array(self.expr_list(&Tok::RBracket)?))
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
                    return match crate::sql::functions::Func::lookup(&upper) {
                        Some(func) => Ok(Expr::Call(func, args)),
                        None => Err(crate::sql::functions::unknown(&upper)),
                    };
                }
                Ok(Expr::Ident(name))
            }
            _ => self.error_here(),
        }
    }
}

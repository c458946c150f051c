//! The Cosmos SQL syntax tree, and printing it back as SQL (query plans hand rewritten queries
//! to the official SDKs).

use serde_json::Value;
use std::fmt::{self, Write as _};

/// Aliases are bound to numbered slots; slot 0 is the document in top-level FROM expressions.
pub type Slot = u32;
pub const DOC_SLOT: Slot = 0;

#[derive(Debug, Clone, PartialEq)]
pub struct Query {
    pub select: Select,
    pub from: Option<From>,
    pub where_: Option<Expr>,
    pub group_by: Vec<Expr>,
    pub order_by: Option<OrderBy>,
    pub offset: Option<Expr>,
    pub limit: Option<Expr>,
    /// The aggregates of this query level, in order (`Expr::Agg::index`); set by the binder.
    pub aggregates: Vec<(AggFunc, Expr)>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Select {
    pub distinct: bool,
    pub top: Option<Expr>,
    pub projection: Projection,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Projection {
    Star,
    Value(Expr),
    List(Vec<SelectItem>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct SelectItem {
    pub expr: Expr,
    pub alias: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct From {
    pub first: Source,
    pub joins: Vec<Source>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Source {
    pub kind: SourceKind,
    /// The name rows are bound to (none for an unnamed subquery join).
    pub alias: Option<String>,
    /// Filled in by the binder.
    pub slot: Slot,
}

#[derive(Debug, Clone, PartialEq)]
pub enum SourceKind {
    /// `c`, `Families f`, `Families.children[0] c`: one value per input row.
    Value(Expr),
    /// `x IN c.arr`: one row per array element.
    Iterate(Expr),
    /// `(SELECT ...)`: one row per subquery result.
    Subquery(Box<Query>),
}

#[derive(Debug, Clone, PartialEq)]
pub enum OrderBy {
    Items(Vec<OrderItem>),
    /// `ORDER BY RANK <score expression>` (full-text / hybrid search), highest first.
    Rank(Expr),
}

#[derive(Debug, Clone, PartialEq)]
pub struct OrderItem {
    pub expr: Expr,
    pub descending: bool,
    /// Whether the query wrote ASC or DESC (an ORDER BY VectorDistance may not: its direction
    /// follows the distance function).
    pub direction_given: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnOp {
    Not,
    Neg,
    Plus,
    BitNot,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinOp {
    And,
    Or,
    Eq,
    Neq,
    Lt,
    Gt,
    Le,
    Ge,
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    Concat,
    BitAnd,
    BitOr,
    BitXor,
    Shl,
    Shr,
    ShrZero,
}

impl BinOp {
    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::And => "AND",
            BinOp::Or => "OR",
            BinOp::Eq => "=",
            BinOp::Neq => "!=",
            BinOp::Lt => "<",
            BinOp::Gt => ">",
            BinOp::Le => "<=",
            BinOp::Ge => ">=",
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Mod => "%",
            BinOp::Concat => "||",
            BinOp::BitAnd => "&",
            BinOp::BitOr => "|",
            BinOp::BitXor => "^",
            BinOp::Shl => "<<",
            BinOp::Shr => ">>",
            BinOp::ShrZero => ">>>",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AggFunc {
    Count,
    Sum,
    Avg,
    Min,
    Max,
    CountIf,
}

impl AggFunc {
    pub fn from_name(upper: &str) -> Option<Self> {
        Some(match upper {
            "COUNT" => AggFunc::Count,
            "SUM" => AggFunc::Sum,
            "AVG" => AggFunc::Avg,
            "MIN" => AggFunc::Min,
            "MAX" => AggFunc::Max,
            "COUNTIF" => AggFunc::CountIf,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            AggFunc::Count => "COUNT",
            AggFunc::Sum => "SUM",
            AggFunc::Avg => "AVG",
            AggFunc::Min => "MIN",
            AggFunc::Max => "MAX",
            AggFunc::CountIf => "COUNTIF",
        }
    }

    /// The name the query plan uses (`aggregates: ["Count"]`).
    pub fn plan_name(self) -> &'static str {
        match self {
            AggFunc::Count | AggFunc::CountIf => "Count",
            AggFunc::Sum => "Sum",
            AggFunc::Avg => "Average",
            AggFunc::Min => "Min",
            AggFunc::Max => "Max",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    Lit(Value),
    Undefined,
    Param(String),
    /// An alias as written, before binding.
    Ident(String),
    /// A bound alias.
    Slot(Slot, String),
    Member(Box<Expr>, String),
    Index(Box<Expr>, Box<Expr>),
    Array(Vec<Expr>),
    Object(Vec<(String, Expr)>),
    Unary(UnOp, Box<Expr>),
    Binary(BinOp, Box<Expr>, Box<Expr>),
    Between {
        expr: Box<Expr>,
        low: Box<Expr>,
        high: Box<Expr>,
        negated: bool,
    },
    In {
        expr: Box<Expr>,
        list: Vec<Expr>,
        negated: bool,
    },
    Like {
        expr: Box<Expr>,
        pattern: Box<Expr>,
        escape: Option<Box<Expr>>,
        negated: bool,
    },
    Ternary(Box<Expr>, Box<Expr>, Box<Expr>),
    Coalesce(Box<Expr>, Box<Expr>),
    /// A system function, resolved when parsed.
    Call(super::functions::Func, Vec<Expr>),
    Udf(String, Vec<Expr>),
    /// An aggregate; `index` is its position in the query's aggregate list (set by the binder).
    Agg {
        func: AggFunc,
        arg: Box<Expr>,
        index: usize,
    },
    Exists(Box<Query>),
    ArraySub(Box<Query>),
    Scalar(Box<Query>),
    /// Under GROUP BY: the i-th group key of the current group.
    GroupKey(usize),
}

impl Expr {
    pub fn boxed(self) -> Box<Expr> {
        Box::new(self)
    }

    /// Visits this expression and its sub-expressions (not into subqueries).
    pub fn walk(&self, f: &mut dyn FnMut(&Expr)) {
        f(self);
        match self {
            Expr::Member(e, _) | Expr::Unary(_, e) => e.walk(f),
            Expr::Index(a, b) | Expr::Binary(_, a, b) | Expr::Coalesce(a, b) => {
                a.walk(f);
                b.walk(f);
            }
            Expr::Array(v) | Expr::Call(_, v) | Expr::Udf(_, v) => v.iter().for_each(|e| e.walk(f)),
            Expr::Object(v) => v.iter().for_each(|(_, e)| e.walk(f)),
            Expr::Between {
                expr, low, high, ..
            } => {
                expr.walk(f);
                low.walk(f);
                high.walk(f);
            }
            Expr::In { expr, list, .. } => {
                expr.walk(f);
                list.iter().for_each(|e| e.walk(f));
            }
            Expr::Like {
                expr,
                pattern,
                escape,
                ..
            } => {
                expr.walk(f);
                pattern.walk(f);
                if let Some(e) = escape {
                    e.walk(f);
                }
            }
            Expr::Ternary(a, b, c) => {
                a.walk(f);
                b.walk(f);
                c.walk(f);
            }
            Expr::Agg { arg, .. } => arg.walk(f),
            _ => {}
        }
    }

    /// Visits this expression and its sub-expressions mutably, children first (not into
    /// subqueries).
    pub fn walk_mut(&mut self, f: &mut dyn FnMut(&mut Expr)) {
        match self {
            Expr::Member(e, _) | Expr::Unary(_, e) | Expr::Agg { arg: e, .. } => e.walk_mut(f),
            Expr::Index(a, b) | Expr::Binary(_, a, b) | Expr::Coalesce(a, b) => {
                a.walk_mut(f);
                b.walk_mut(f);
            }
            Expr::Array(v) | Expr::Call(_, v) | Expr::Udf(_, v) => {
                v.iter_mut().for_each(|e| e.walk_mut(f))
            }
            Expr::Object(v) => v.iter_mut().for_each(|(_, e)| e.walk_mut(f)),
            Expr::Between {
                expr, low, high, ..
            } => {
                expr.walk_mut(f);
                low.walk_mut(f);
                high.walk_mut(f);
            }
            Expr::In { expr, list, .. } => {
                expr.walk_mut(f);
                list.iter_mut().for_each(|e| e.walk_mut(f));
            }
            Expr::Like {
                expr,
                pattern,
                escape,
                ..
            } => {
                expr.walk_mut(f);
                pattern.walk_mut(f);
                if let Some(e) = escape {
                    e.walk_mut(f);
                }
            }
            Expr::Ternary(a, b, c) => {
                a.walk_mut(f);
                b.walk_mut(f);
                c.walk_mut(f);
            }
            _ => {}
        }
        f(self);
    }

    /// Whether this is a call of `VectorDistance`.
    pub fn is_vector_distance(&self) -> bool {
        matches!(
            self,
            Expr::Call(
                super::functions::Func::Search(super::functions::SearchFn::VectorDistance),
                _
            )
        )
    }

    pub fn contains_aggregate(&self) -> bool {
        let mut found = false;
        self.walk(&mut |e| {
            if matches!(e, Expr::Agg { .. }) {
                found = true;
            }
        });
        found
    }

    /// For a plain property path (`c.a.b`, `c["x"]`), the alias slot and property names.
    pub fn as_path(&self) -> Option<(Slot, Vec<&str>)> {
        match self {
            Expr::Slot(s, _) => Some((*s, Vec::new())),
            Expr::Member(base, name) => {
                let (s, mut p) = base.as_path()?;
                p.push(name);
                Some((s, p))
            }
            Expr::Index(base, idx) => match idx.as_ref() {
                Expr::Lit(Value::String(name)) => {
                    let (s, mut p) = base.as_path()?;
                    p.push(name);
                    Some((s, p))
                }
                _ => None,
            },
            _ => None,
        }
    }
}

// ---- printing ------------------------------------------------------------------------------

fn write_str_lit(f: &mut fmt::Formatter<'_>, s: &str) -> fmt::Result {
    f.write_str(&serde_json::to_string(s).map_err(|_| fmt::Error)?)
}

fn write_name(f: &mut fmt::Formatter<'_>, s: &str) -> fmt::Result {
    let plain = s
        .chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_' || c == '$')
        && s.chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == '$')
        && !super::lexer::KEYWORDS
            .iter()
            .any(|k| k.eq_ignore_ascii_case(s));
    if plain {
        f.write_str(s)
    } else {
        write_str_lit(f, s)
    }
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        super::limits::deep(|| self.fmt_at_depth(f))
    }
}

impl Expr {
    fn fmt_at_depth(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expr::Lit(v) => write!(f, "{v}"),
            Expr::Undefined => f.write_str("undefined"),
            Expr::Param(p) => write!(f, "@{p}"),
            Expr::Ident(s) | Expr::Slot(_, s) => f.write_str(s),
            Expr::Member(b, name) => {
                let plain = name
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_alphabetic() || c == '_' || c == '$')
                    && name
                        .chars()
                        .all(|c| c.is_alphanumeric() || c == '_' || c == '$')
                    && !super::lexer::KEYWORDS
                        .iter()
                        .any(|k| k.eq_ignore_ascii_case(name));
                if plain {
                    write!(f, "{b}.{name}")
                } else {
                    write!(f, "{b}[")?;
                    write_str_lit(f, name)?;
                    f.write_str("]")
                }
            }
            Expr::Index(b, i) => write!(f, "{b}[{i}]"),
            Expr::Array(v) => {
                f.write_str("[")?;
                for (i, e) in v.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{e}")?;
                }
                f.write_str("]")
            }
            Expr::Object(v) => {
                f.write_str("{")?;
                for (i, (k, e)) in v.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write_str_lit(f, k)?;
                    write!(f, ": {e}")?;
                }
                f.write_str("}")
            }
            Expr::Unary(op, e) => match op {
                UnOp::Not => write!(f, "(NOT {e})"),
                UnOp::Neg => write!(f, "(-{e})"),
                UnOp::Plus => write!(f, "(+{e})"),
                UnOp::BitNot => write!(f, "(~{e})"),
            },
            Expr::Binary(op, a, b) => write!(f, "({a} {} {b})", op.symbol()),
            Expr::Between {
                expr,
                low,
                high,
                negated,
            } => write!(
                f,
                "({expr} {}BETWEEN {low} AND {high})",
                if *negated { "NOT " } else { "" }
            ),
            Expr::In {
                expr,
                list,
                negated,
            } => {
                write!(f, "({expr} {}IN (", if *negated { "NOT " } else { "" })?;
                for (i, e) in list.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{e}")?;
                }
                f.write_str("))")
            }
            Expr::Like {
                expr,
                pattern,
                escape,
                negated,
            } => {
                write!(
                    f,
                    "({expr} {}LIKE {pattern}",
                    if *negated { "NOT " } else { "" }
                )?;
                if let Some(e) = escape {
                    write!(f, " ESCAPE {e}")?;
                }
                f.write_str(")")
            }
            Expr::Ternary(a, b, c) => write!(f, "({a} ? {b} : {c})"),
            Expr::Coalesce(a, b) => write!(f, "({a} ?? {b})"),
            Expr::Call(func, args) => {
                write!(f, "{}(", func.name())?;
                write_args(f, args)
            }
            Expr::Udf(name, args) => {
                write!(f, "udf.{name}(")?;
                write_args(f, args)
            }
            Expr::Agg { func, arg, .. } => write!(f, "{}({arg})", func.name()),
            Expr::Exists(q) => write!(f, "EXISTS({q})"),
            Expr::ArraySub(q) => write!(f, "ARRAY({q})"),
            Expr::Scalar(q) => write!(f, "({q})"),
            Expr::GroupKey(i) => write!(f, "$groupKey{i}"),
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            SourceKind::Value(e) => {
                write!(f, "{e}")?;
                if let Some(a) = &self.alias {
                    if e.to_string() != *a {
                        f.write_str(" AS ")?;
                        write_name(f, a)?;
                    }
                }
                Ok(())
            }
            SourceKind::Iterate(e) => {
                write_name(f, self.alias.as_deref().unwrap_or("_"))?;
                write!(f, " IN {e}")
            }
            SourceKind::Subquery(q) => {
                write!(f, "({q})")?;
                if let Some(a) = &self.alias {
                    f.write_str(" AS ")?;
                    write_name(f, a)?;
                }
                Ok(())
            }
        }
    }
}

impl fmt::Display for Query {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SELECT ")?;
        if self.select.distinct {
            f.write_str("DISTINCT ")?;
        }
        if let Some(t) = &self.select.top {
            write!(f, "TOP {t} ")?;
        }
        match &self.select.projection {
            Projection::Star => f.write_str("*")?,
            Projection::Value(e) => write!(f, "VALUE {e}")?,
            Projection::List(items) => {
                for (i, it) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{}", it.expr)?;
                    if let Some(a) = &it.alias {
                        f.write_str(" AS ")?;
                        write_name(f, a)?;
                    }
                }
            }
        }
        if let Some(from) = &self.from {
            write!(f, " FROM {}", from.first)?;
            for j in &from.joins {
                write!(f, " JOIN {j}")?;
            }
        }
        if let Some(w) = &self.where_ {
            write!(f, " WHERE {w}")?;
        }
        if !self.group_by.is_empty() {
            f.write_str(" GROUP BY ")?;
            let mut s = String::new();
            for (i, g) in self.group_by.iter().enumerate() {
                if i > 0 {
                    s.push_str(", ");
                }
                let _ = write!(s, "{g}");
            }
            f.write_str(&s)?;
        }
        match &self.order_by {
            Some(OrderBy::Items(items)) => {
                f.write_str(" ORDER BY ")?;
                for (i, it) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{}", it.expr)?;
                    if it.direction_given {
                        f.write_str(if it.descending { " DESC" } else { " ASC" })?;
                    }
                }
            }
            Some(OrderBy::Rank(e)) => write!(f, " ORDER BY RANK {e}")?,
            None => {}
        }
        if let (Some(o), Some(l)) = (&self.offset, &self.limit) {
            write!(f, " OFFSET {o} LIMIT {l}")?;
        }
        Ok(())
    }
}

/// `a, b, c)`: the arguments of a call and its closing parenthesis.
fn write_args(f: &mut std::fmt::Formatter<'_>, args: &[Expr]) -> std::fmt::Result {
    for (i, e) in args.iter().enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        write!(f, "{e}")?;
    }
    f.write_str(")")
}

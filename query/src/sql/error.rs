//! Query errors: everything a client can get wrong is a 400 with a message naming the place.

use std::fmt;

/// A position in the query text (1-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Span {
    pub line: u64,
    pub col: u64,
}

impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}, column {}", self.line, self.col)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    /// The text does not parse.
    #[error("{message} (at {span})")]
    Syntax { message: String, span: Span },
    /// The text parses but is not a valid query (unknown alias, misplaced aggregate...).
    #[error("{0}")]
    Semantic(String),
    /// A user-defined function failed (threw, or ran past its budget).
    #[error("{0}")]
    Script(String),
    /// The continuation token cannot be used.
    #[error("{0}")]
    BadContinuation(String),
}

impl QueryError {
    pub fn syntax(message: impl Into<String>, span: Span) -> Self {
        QueryError::Syntax {
            message: message.into(),
            span,
        }
    }

    pub fn semantic(message: impl Into<String>) -> Self {
        QueryError::Semantic(message.into())
    }
}

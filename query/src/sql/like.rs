//! SQL `LIKE`: `%`, `_`, character classes and an escape character, with a step budget so one
//! comparison cannot run for minutes.

/// SQL LIKE with `%`, `_`, `[abc]`, `[a-z]`, `[^...]` and an optional escape character.
pub fn like(s: &str, pattern: &str, escape: Option<char>) -> bool {
    like_within(s, pattern, escape, u64::MAX).unwrap_or(false)
}

/// Most matching steps one `LIKE` may take. Matching backtracks to the last `%`, so a long
/// pattern against a long string costs their product (a 500 KB pattern against a 2 MB string
/// would run for minutes); this bounds one comparison to well under a second.
pub const MAX_LIKE_STEPS: u64 = 100_000_000;

/// [`like`], giving up (`None`) after `budget` steps.
pub fn like_within(s: &str, pattern: &str, escape: Option<char>, budget: u64) -> Option<bool> {
    #[derive(Debug)]
    enum P {
        Any,
        One,
        Lit(char),
        Class(Vec<(char, char)>, bool),
    }
    let mut pat = Vec::new();
    let mut it = pattern.chars().peekable();
    while let Some(c) = it.next() {
        if Some(c) == escape {
            if let Some(n) = it.next() {
                pat.push(P::Lit(n));
            }
            continue;
        }
        match c {
            '%' => pat.push(P::Any),
            '_' => pat.push(P::One),
            '[' => {
                let mut set = Vec::new();
                let mut neg = false;
                if it.peek() == Some(&'^') {
                    neg = true;
                    it.next();
                }
                let mut closed = false;
                while let Some(x) = it.next() {
                    if x == ']' {
                        closed = true;
                        break;
                    }
                    if it.peek() == Some(&'-') {
                        let mut look = it.clone();
                        look.next();
                        if let Some(&hi) = look.peek() {
                            if hi != ']' {
                                it.next();
                                it.next();
                                set.push((x, hi));
                                continue;
                            }
                        }
                    }
                    set.push((x, x));
                }
                if closed {
                    pat.push(P::Class(set, neg));
                } else {
                    pat.push(P::Lit('['));
                }
            }
            c => pat.push(P::Lit(c)),
        }
    }
    let chars: Vec<char> = s.chars().collect();
    // Iterative wildcard matching with backtracking to the last '%'.
    let (mut i, mut j) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    let mut steps = 0u64;
    while i < chars.len() {
        steps += 1;
        if steps > budget {
            return None;
        }
        let step = match pat.get(j) {
            Some(P::One) => true,
            Some(P::Lit(c)) => *c == chars[i],
            Some(P::Class(set, neg)) => {
                set.iter()
                    .any(|(lo, hi)| *lo <= chars[i] && chars[i] <= *hi)
                    != *neg
            }
            _ => false,
        };
        if step {
            i += 1;
            j += 1;
        } else if let Some(P::Any) = pat.get(j) {
            star = Some((j, i));
            j += 1;
        } else if let Some((sj, si)) = star {
            j = sj + 1;
            i = si + 1;
            star = Some((sj, si + 1));
        } else {
            return Some(false);
        }
    }
    while let Some(P::Any) = pat.get(j) {
        j += 1;
    }
    Some(j == pat.len())
}

//! Every query of `tests/data/sql-corpus/` marked `expect=ok` parses, and every probe
//! marked `expect=err` is rejected (by the parser or the binder), as Cosmos does.

use std::path::Path;
use strata_query::sql::{parser, prepare};

struct Case {
    id: String,
    expect: String,
    sql: String,
}

fn load() -> Vec<Case> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/sql-corpus");
    let mut out = Vec::new();
    for name in ["docs.txt", "samples.txt", "probes.txt"] {
        let text = std::fs::read_to_string(dir.join(name)).expect("corpus file");
        let mut cur: Option<Case> = None;
        for line in text.lines() {
            if let Some(h) = line.strip_prefix("### ") {
                out.extend(cur.take());
                let field = |k: &str| {
                    h.split_whitespace()
                        .find_map(|f| f.strip_prefix(k))
                        .unwrap_or("")
                        .to_string()
                };
                cur = Some(Case {
                    id: field("id="),
                    expect: field("expect="),
                    sql: String::new(),
                });
            } else if let Some(c) = cur.as_mut() {
                c.sql.push_str(line);
                c.sql.push('\n');
            }
        }
        out.extend(cur);
    }
    out
}

#[test]
fn corpus_queries_parse_and_probes_are_rejected() {
    let cases = load();
    assert!(
        cases.len() >= 120,
        "expected the whole corpus, got {}",
        cases.len()
    );
    let mut failures = Vec::new();
    let (mut ok, mut err) = (0, 0);
    for c in &cases {
        match c.expect.as_str() {
            "ok" => {
                ok += 1;
                if let Err(e) = parser::parse(&c.sql) {
                    failures.push(format!("{} should parse: {e}\n{}", c.id, c.sql));
                }
            }
            "err" => {
                err += 1;
                let rejected = match parser::parse(&c.sql) {
                    Err(_) => true,
                    Ok(_) => prepare(&c.sql, &[], None).is_err(),
                };
                if !rejected {
                    failures.push(format!("{} should be rejected:\n{}", c.id, c.sql));
                }
            }
            _ => {}
        }
    }
    assert!(ok >= 110 && err >= 9, "ok={ok} err={err}");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

//! The advice as text for a terminal: the assumptions, each key best first with its
//! figures and checks, the recommendation with its reasons and copy command, and how the
//! heaviest sampled queries would route under it.

use super::advice::Advice;
use super::assess::{size, Assessment};
use std::fmt::Write as _;

/// How many of the heaviest queries the report lists.
const TOP_QUERIES: usize = 5;

pub fn render(a: &Advice) -> String {
    let s = &a.settings;
    let mut out = String::new();
    let read = match a.source.items_total {
        Some(t) if t > a.items_read => format!(
            "{} of {t} items read (a sample: sizes and counts scaled by {:.2})",
            a.items_read, s.scale
        ),
        _ => format!("{} items read (all)", a.items_read),
    };
    let _ = writeln!(
        out,
        "{}/{}: {read}; {} query shape(s), {:.0} execution(s) sampled",
        a.source.database, a.source.container, a.query_shapes, a.query_executions
    );
    let _ = writeln!(
        out,
        "assuming {} RU/s, physical partitions split past {}, logical partitions hold at most {}, growth {}×, writes of the last {} s",
        s.throughput,
        size(s.split_bytes),
        size(s.logical_limit),
        s.growth,
        s.window_secs
    );
    for (i, c) in a.candidates.iter().enumerate() {
        let _ = writeln!(out);
        candidate(&mut out, i + 1, c, a);
    }
    let r = &a.recommendation;
    let _ = writeln!(out);
    if r.keep_current {
        let _ = writeln!(out, "Recommendation: keep {}", r.key.join(","));
    } else {
        let _ = writeln!(out, "Recommendation: {}", r.key.join(","));
    }
    for reason in &r.reasons {
        let _ = writeln!(out, "  - {reason}");
    }
    if let Some(cmd) = &r.command {
        let _ = writeln!(out, "Migrate with:\n  {cmd}");
    }
    if let Some(best) = a.candidates.first() {
        let shown: Vec<_> = best
            .routing
            .queries
            .iter()
            .filter(|q| q.error.is_none())
            .take(TOP_QUERIES)
            .collect();
        if !shown.is_empty() {
            let _ = writeln!(
                out,
                "Heaviest sampled queries under {}:",
                best.key.join(",")
            );
            for q in shown {
                let _ = writeln!(
                    out,
                    "  {:<9} {:>5.1} partition(s) {:>9.1} RU  x{:<6.0} {}",
                    q.route, q.partitions, q.request_charge, q.count, q.text
                );
            }
        }
    }
    out
}

fn candidate(out: &mut String, rank: usize, c: &Assessment, a: &Advice) {
    let mut tags = Vec::new();
    if c.current {
        tags.push("current");
    }
    if c.key == a.recommendation.key {
        tags.push("recommended");
    }
    let tags = if tags.is_empty() {
        String::new()
    } else {
        format!("  ({})", tags.join(", "))
    };
    let (l, p, h, r) = (&c.logical, &c.physical, &c.heat, &c.routing);
    let g = a.settings.growth;
    let _ = writeln!(out, "#{rank} {}{tags}", c.key.join(","));
    let _ = writeln!(
        out,
        "   logical partitions  {} (first level: {} values); largest {} {}, median {}; at {g}×: {}",
        l.count,
        c.first_level_values,
        l.largest_key,
        size(l.largest_bytes),
        size(l.median_bytes),
        size(l.largest_bytes_at_growth)
    );
    let _ = writeln!(
        out,
        "   physical partitions {} ({} at {g}×), skew {:.2}  {}",
        p.partitions,
        p.partitions_at_growth,
        p.skew,
        bars(&p.bytes)
    );
    let busiest = h.physical_ru_per_sec.iter().copied().fold(0.0, f64::max);
    let _ = writeln!(
        out,
        "   write heat          {} recent write(s), {:.1} RU/s; busiest logical {:.1} RU/s {}; busiest physical {:.1} of {:.0} RU/s",
        h.recent_writes,
        h.write_ru_per_sec,
        h.busiest_logical_ru_per_sec,
        h.busiest_logical_key,
        busiest,
        h.partition_budget
    );
    if r.executions > 0.0 {
        let _ = writeln!(
            out,
            "   query routing       {:.0}% single, {:.0}% targeted, {:.0}% fan-out; est. {:.0} RU ({:.0}% of it fan-out)",
            r.single * 100.0,
            r.targeted * 100.0,
            r.fanout * 100.0,
            r.request_charge,
            r.fanout_ru * 100.0
        );
    }
    for check in &c.checks {
        let _ = writeln!(
            out,
            "   {} {:<35} {}",
            if check.ok { "ok  " } else { "FAIL" },
            check.name,
            check.detail
        );
    }
}

/// One character per physical partition, its height its share of the largest.
fn bars(bytes: &[u64]) -> String {
    const LEVELS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let max = bytes.iter().copied().max().unwrap_or(0).max(1) as f64;
    let shown: String = bytes
        .iter()
        .take(64)
        .map(|b| LEVELS[((*b as f64 / max) * 7.0).round() as usize])
        .collect();
    if bytes.len() > 64 {
        format!("{shown}…")
    } else {
        shown
    }
}

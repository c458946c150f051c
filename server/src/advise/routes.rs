//! Replaying the query sample under a candidate key: each shape, with each of its recorded
//! parameter values, prepared for the candidate and routed by the real planner
//! ([`route_plan::plan`]) over the simulated partition map.
//!
//! A query sent with a partition key header is replayed as the application would send it
//! under the candidate: with everything it knows of the key. The header's values (of the
//! current key's paths) join the WHERE clause, so a query that names tenant, user and
//! session between header and filter routes to one logical partition of a
//! `/TenantId/UserId/SessionId` key — which the application gets by sending the full key
//! (or the filter); sent with the old prefix header unchanged it would visit every physical
//! partition of the prefix.
//!
//! The request units of a replayed query are estimated from what it cost when it ran: the
//! part that does not depend on the route (documents read, bytes returned) is kept, and each
//! physical partition visited costs [`PER_PARTITION_RU`], the fixed charge of one partition's
//! request (an SDK fans a cross-partition query out as one request per partition).

use super::sample::Shape;
use serde::Serialize;
use strata_query::pk::PartitionKeyDefinition;
use strata_query::sql::route_plan::{self, Partition, RequestScope, Route};
use strata_query::sql::routing::route_scoped;

/// The fixed request units of one physical partition's part of a query.
pub const PER_PARTITION_RU: f64 = 2.3;

/// One shape's route under a candidate.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Replayed {
    pub text: String,
    pub count: f64,
    /// The route most of its executions take.
    pub route: String,
    /// Physical partitions visited, on average over its examples.
    pub partitions: f64,
    /// Estimated request units of all its executions.
    pub request_charge: f64,
    /// Why it could not be replayed, if it could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The most replayed shapes an advice lists per candidate (the heaviest; the shares count
/// them all): a sample of a thousand long shapes under nine keys would otherwise be a reply
/// of tens of megabytes.
pub const MAX_LISTED: usize = 50;

/// How a candidate routes the sample, weighted by executions and by request units.
#[derive(Debug, Clone, Serialize, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Routing {
    pub executions: f64,
    /// Shares of executions: single partition, targeted (a key prefix), fan-out.
    pub single: f64,
    pub targeted: f64,
    pub fanout: f64,
    /// Shares of the estimated request units, in the same order.
    pub single_ru: f64,
    pub targeted_ru: f64,
    pub fanout_ru: f64,
    /// Estimated request units of every sampled execution.
    pub request_charge: f64,
    /// The heaviest [`MAX_LISTED`] shapes.
    pub queries: Vec<Replayed>,
    /// Shapes routed but not listed.
    #[serde(skip_serializing_if = "is_zero")]
    pub unlisted: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// Routes every shape under `def` over `partitions`; `current` is the key the sample was
/// recorded under (a partition key header names its values).
pub fn replay(
    shapes: &[Shape],
    current: &PartitionKeyDefinition,
    def: &PartitionKeyDefinition,
    partitions: &[Partition],
) -> Routing {
    let mut out = Routing::default();
    let mut by_route = [(0.0, 0.0); 3];
    for shape in shapes.iter().filter(|s| s.count > 0.0) {
        let r = replay_one(shape, current, def, partitions);
        if r.error.is_none() {
            let slot = match r.route.as_str() {
                "single" => 0,
                "targeted" => 1,
                _ => 2,
            };
            by_route[slot].0 += r.count;
            by_route[slot].1 += r.request_charge;
            out.executions += r.count;
            out.request_charge += r.request_charge;
        }
        out.queries.push(r);
    }
    let share = |x: f64, of: f64| if of > 0.0 { x / of } else { 0.0 };
    (out.single, out.targeted, out.fanout) = (
        share(by_route[0].0, out.executions),
        share(by_route[1].0, out.executions),
        share(by_route[2].0, out.executions),
    );
    (out.single_ru, out.targeted_ru, out.fanout_ru) = (
        share(by_route[0].1, out.request_charge),
        share(by_route[1].1, out.request_charge),
        share(by_route[2].1, out.request_charge),
    );
    out.queries
        .sort_by(|a, b| b.request_charge.total_cmp(&a.request_charge));
    out.unlisted = out.queries.len().saturating_sub(MAX_LISTED);
    out.queries.truncate(MAX_LISTED);
    out
}

fn replay_one(
    shape: &Shape,
    current: &PartitionKeyDefinition,
    def: &PartitionKeyDefinition,
    partitions: &[Partition],
) -> Replayed {
    let per_run = shape.request_charge / shape.count;
    let observed_partitions = shape.partitions / shape.count;
    let fixed = (per_run - PER_PARTITION_RU * observed_partitions).max(0.0);
    let mut routes = [0usize; 3];
    let mut visited = 0usize;
    let mut error = None;
    let no_values = [super::sample::Example {
        parameters: Vec::new(),
        partition_key: None,
        elided: false,
    }];
    let examples = if shape.examples.is_empty() {
        &no_values[..]
    } else {
        &shape.examples[..]
    };
    let mut routed = 0usize;
    for ex in examples {
        let mut p = match strata_query::sql::prepare(&shape.text, &ex.bindings(), Some(def)) {
            Ok(p) => p,
            Err(e) => {
                error = Some(e.to_string());
                continue;
            }
        };
        if let Some(key) = &ex.partition_key {
            let values = key.as_array().cloned().unwrap_or_else(|| vec![key.clone()]);
            p.routing = route_scoped(&p.query, def, current, &values);
        }
        let plan = route_plan::plan(&p, &RequestScope::whole(), partitions);
        routes[match plan.route {
            Route::Single => 0,
            Route::Targeted => 1,
            Route::FanOut => 2,
        }] += 1;
        visited += plan.partition_ids().len();
        routed += 1;
    }
    if routed == 0 {
        return Replayed {
            text: shape.text.clone(),
            count: shape.count,
            route: "unknown".into(),
            partitions: 0.0,
            request_charge: 0.0,
            error: Some(error.unwrap_or_else(|| "no values recorded".into())),
        };
    }
    let most = (0..3).max_by_key(|&i| (routes[i], 3 - i)).unwrap_or(2);
    let partitions = visited as f64 / routed as f64;
    Replayed {
        text: shape.text.clone(),
        count: shape.count,
        route: ["single", "targeted", "fanout"][most].into(),
        partitions,
        request_charge: shape.count * (fixed + PER_PARTITION_RU * partitions),
        error: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::advise::sample::Example;
    use serde_json::json;
    use strata_query::pk::EpkRange;

    fn shape(text: &str, params: Vec<serde_json::Value>, pk: Option<serde_json::Value>) -> Shape {
        Shape {
            text: text.into(),
            partition_key_header: pk.is_some(),
            count: 10.0,
            request_charge: 10.0 * (2.3 * 4.0 + 1.0),
            partitions: 40.0,
            route: "fanout".into(),
            examples: vec![Example {
                parameters: params,
                partition_key: pk,
                elided: false,
            }],
            last_seen: 0,
        }
    }

    fn four() -> Vec<Partition> {
        let b = ["", "40", "80", "C0", "FF"];
        (0..4)
            .map(|i| Partition {
                id: i as u32,
                range: EpkRange::new(b[i], b[i + 1]),
            })
            .collect()
    }

    #[test]
    fn routes_and_estimates_under_a_candidate() {
        let current = PartitionKeyDefinition::hash_v2("/TenantId");
        let three =
            PartitionKeyDefinition::multi_hash(&["/TenantId", "/UserId", "/SessionId"]).unwrap();
        let shapes = vec![
            shape(
                "SELECT * FROM c WHERE c.TenantId = @t",
                vec![json!({"name": "@t", "value": "acme"})],
                None,
            ),
            shape(
                "SELECT * FROM c WHERE c.UserId = @__v1 AND c.SessionId = @__v2",
                vec![
                    json!({"name": "@__v1", "value": "u"}),
                    json!({"name": "@__v2", "value": "s"}),
                ],
                Some(json!(["acme"])),
            ),
            shape("SELECT * FROM c WHERE c.kind = 'x'", vec![], None),
        ];
        let r = replay(&shapes, &current, &three, &four());
        let by_text = |t: &str| r.queries.iter().find(|q| q.text.starts_with(t)).unwrap();
        assert_eq!(
            by_text("SELECT * FROM c WHERE c.TenantId").route,
            "targeted"
        );
        // The tenant header and the filter name the full key.
        let single = by_text("SELECT * FROM c WHERE c.UserId");
        assert_eq!((single.route.as_str(), single.partitions), ("single", 1.0));
        // 1 RU of work kept, one partition's fixed charge instead of four.
        assert!((single.request_charge - 10.0 * 3.3).abs() < 1e-9);
        let fan = by_text("SELECT * FROM c WHERE c.kind");
        assert_eq!((fan.route.as_str(), fan.partitions), ("fanout", 4.0));
        assert!((r.single + r.targeted + r.fanout - 1.0).abs() < 1e-9);
        assert!(r.fanout_ru > r.targeted_ru);
        // Under a key the header cannot name, its value joins the WHERE clause.
        let user = PartitionKeyDefinition::multi_hash(&["/UserId", "/SessionId"]).unwrap();
        let r = replay(&shapes, &current, &user, &four());
        let by_text = |t: &str| r.queries.iter().find(|q| q.text.starts_with(t)).unwrap();
        assert_eq!(by_text("SELECT * FROM c WHERE c.UserId").route, "single");
        assert_eq!(by_text("SELECT * FROM c WHERE c.TenantId").route, "fanout");
    }
}

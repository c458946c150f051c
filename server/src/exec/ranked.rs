//! `ORDER BY RANK` on the server: BM25 statistics gathered over the query's scope before
//! any row is scored (RRF fusion of the components over all rows is `ordered::fuse`) (see
//! `strata_query::sql::hybrid` for the steps; the SDKs run the same ones per partition when
//! the gateway hands them the plan).

use super::complete::run_complete;
use super::*;
use strata_query::sql::hybrid;

/// `plan` with each `FullTextScore` of its ranking scored under statistics counted over the
/// partitions (and key range) the query reads.
pub(super) async fn with_statistics(c: &Arc<Container>, plan: &Plan) -> Result<Plan, ExecError> {
    let p = &plan.query;
    let Some(text) = hybrid::statistics_query(&p.query) else {
        return Ok(plan.clone());
    };
    let sp = Arc::new(sql::prepare(&text, &[], Some(&c.pk))?);
    let sa = Arc::new(access(c, &sp, true)?);
    let page = run_complete(Arc::clone(c), sp, sa, plan.routing.ranges.clone(), 1, None).await?;
    let rows = page
        .docs
        .iter()
        .map(|d| serde_json::from_slice(d).map_err(|e| ExecError::Corrupt(e.to_string())))
        .collect::<Result<Vec<Value>, ExecError>>()?;
    let stats = hybrid::add_statistics(&rows);
    let mut scored = PreparedQuery::clone(p);
    scored.query = hybrid::with_statistics(&p.query, &stats)?;
    let mut out = plan.clone();
    out.query = Arc::new(scored);
    Ok(out)
}

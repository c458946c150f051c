//! Spatial indexes (`spatialIndexes` in the policy): the cells of a longitude/latitude grid
//! that a document's geometry touches, as index entries, and the cells a spatial filter
//! (`ST_DISTANCE(…) < r`, `ST_WITHIN`, `ST_INTERSECTS`) must look in.
//!
//! The grid has five levels, cells of 10°, 1°, 0.1°, 0.01° and 0.001°. A geometry is indexed
//! at every level by the cells its bounding box covers. Where that box needs more than
//! [`MAX_CELLS`] cells of a level, the geometry is filed at that level under its cells of the
//! finest coarser level that fits (`3>1:row:col`: at level 3, by its level-1 cell), or under
//! the level's overflow term when none does. A query picks the finest level at which its own
//! region (a box, widened by the distance for `ST_DISTANCE`) needs at most [`MAX_CELLS`]
//! cells, and reads those cells, the region's cells of every coarser level under that level's
//! name, and its overflow term. Any geometry that can match overlaps the region, so it shares
//! a cell with it at the level it was filed by: the lookup never misses a match; it may return
//! more, which the query's evaluation of the whole filter removes.
//!
//! Why the widened box holds every point within distance `r` of the region (strata's
//! `ST_DISTANCE` measures along the great ellipse, which is never shorter than the geodesic):
//! a degree of latitude is at least 110,574 m on WGS84, so a path shorter than `r` changes
//! latitude by less than `r / 110,000` degrees; along it the latitude stays within that band,
//! where a degree of longitude is at least `111,000 · cos(φ)` metres at the band's largest
//! absolute latitude `φ`. A band reaching a pole covers every longitude.

use super::policy::Seg;
use super::term::{self, Entry, Span};
use serde_json::Value;

/// Cell sizes, coarsest first (degrees).
const LEVELS: [f64; 5] = [10.0, 1.0, 0.1, 0.01, 0.001];
/// The most cells one geometry is indexed by, or one query reads, at one level.
pub const MAX_CELLS: usize = 64;
const SPATIAL: &str = "\u{0}spatial";

/// A longitude/latitude box: west, south, east, north (degrees; west ≤ east, no wrapping).
type Box2 = (f64, f64, f64, f64);

/// The index path of a spatial path's cells.
pub fn cells_path(segs: &[Seg]) -> Vec<Seg> {
    let mut p = vec![Seg::Name(SPATIAL.to_string())];
    p.extend(segs.iter().cloned());
    p
}

/// The geometry path of a cells path, if `segs` is one.
pub fn geometry_path(segs: &[Seg]) -> Option<&[Seg]> {
    match segs.first()? {
        Seg::Name(n) if n == SPATIAL => Some(&segs[1..]),
        _ => None,
    }
}

/// The term of a cell of level `by`, filed at level `level` (the same level for a geometry
/// that fits there).
fn cell_term(level: usize, by: usize, lat: i64, lon: i64) -> Vec<u8> {
    let name = if level == by {
        format!("{level}:{lat}:{lon}")
    } else {
        format!("{level}>{by}:{lat}:{lon}")
    };
    term::encode(&Value::String(name))
}

fn overflow_term(level: usize) -> Vec<u8> {
    term::encode(&Value::String(format!("{level}:*")))
}

/// The rows and columns of the cells of `level` a box covers (inclusive ranges).
fn cell_range(level: usize, b: Box2) -> ((i64, i64), (i64, i64)) {
    let size = LEVELS[level];
    let row = |lat: f64| ((lat.clamp(-90.0, 90.0) + 90.0) / size).floor() as i64;
    let col = |lon: f64| ((lon.clamp(-180.0, 180.0) + 180.0) / size).floor() as i64;
    ((row(b.1), row(b.3)), (col(b.0), col(b.2)))
}

fn count(level: usize, boxes: &[Box2]) -> usize {
    boxes
        .iter()
        .map(|b| {
            let ((r0, r1), (c0, c1)) = cell_range(level, *b);
            ((r1 - r0 + 1) * (c1 - c0 + 1)) as usize
        })
        .sum()
}

/// The terms of the cells of level `by` the boxes cover, filed at `level`.
fn cells(level: usize, by: usize, boxes: &[Box2]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for b in boxes {
        let ((r0, r1), (c0, c1)) = cell_range(by, *b);
        for r in r0..=r1 {
            out.extend((c0..=c1).map(|c| cell_term(level, by, r, c)));
        }
    }
    out
}

/// The spatial entries of `doc` for each spatial path: a valid GeoJSON geometry at the path
/// is indexed by its cells at every level (or that level's overflow term).
pub fn entries<'a>(doc: &Value, paths: impl IntoIterator<Item = &'a [Seg]>) -> Vec<Entry> {
    let mut out = Vec::new();
    for segs in paths {
        let Some(b) = super::fulltext::value_at(doc, segs).and_then(crate::sql::spatial::bounds)
        else {
            continue;
        };
        let pid = term::path_id(&cells_path(segs));
        // The finest level whose cells cover the box within the bound, if any.
        let fits = (0..LEVELS.len())
            .rev()
            .find(|l| count(*l, &[b]) <= MAX_CELLS);
        for level in 0..LEVELS.len() {
            match fits {
                Some(by) => {
                    let by = by.min(level);
                    out.extend(cells(level, by, &[b]).into_iter().map(|t| (pid, t)));
                }
                None => out.push((pid, overflow_term(level))),
            }
        }
    }
    out
}

/// The region a filter may match in: the geometry's box, widened by `within_m` metres (for
/// `ST_DISTANCE(…) < within_m`), as one or two boxes (two where it crosses the antimeridian).
fn region(geometry: &Value, within_m: f64) -> Option<Vec<Box2>> {
    let (w, s, e, n) = crate::sql::spatial::bounds(geometry)?;
    if within_m <= 0.0 {
        return Some(vec![(w, s, e, n)]);
    }
    let dlat = within_m / 110_000.0;
    let (s, n) = ((s - dlat).max(-90.0), (n + dlat).min(90.0));
    let widest = s.abs().max(n.abs());
    if widest >= 89.9 {
        return Some(vec![(-180.0, s, 180.0, n)]);
    }
    let dlon = within_m / (111_000.0 * widest.to_radians().cos());
    let (w, e) = (w - dlon, e + dlon);
    Some(if e - w >= 360.0 {
        vec![(-180.0, s, 180.0, n)]
    } else if w < -180.0 {
        vec![(w + 360.0, s, 180.0, n), (-180.0, s, e, n)]
    } else if e > 180.0 {
        vec![(w, s, 180.0, n), (-180.0, s, e - 360.0, n)]
    } else {
        vec![(w, s, e, n)]
    })
}

/// The spans of the cells a spatial filter must read: the region of `geometry` (widened by
/// `within_m` metres, 0 for `ST_WITHIN` and `ST_INTERSECTS`) at the finest level that covers
/// it in at most [`MAX_CELLS`] cells, and that level's overflow term; `None` when no level
/// does (a region too large to narrow anything) or the geometry is not valid GeoJSON.
pub fn spans(geometry: &Value, within_m: f64) -> Option<Vec<Span>> {
    if !within_m.is_finite() {
        return None;
    }
    let boxes = region(geometry, within_m)?;
    let level = (0..LEVELS.len())
        .rev()
        .find(|l| count(*l, &boxes) <= MAX_CELLS)?;
    let mut terms: Vec<Vec<u8>> = (0..=level)
        .flat_map(|by| cells(level, by, &boxes))
        .collect();
    terms.push(overflow_term(level));
    terms.sort();
    terms.dedup();
    Some(terms.into_iter().map(Span::point).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn point(lon: f64, lat: f64) -> Value {
        json!({"type": "Point", "coordinates": [lon, lat]})
    }

    /// Whether a document with `doc_geo` at `/loc` is among the candidates of the spans.
    fn candidate(doc_geo: &Value, spans: &[Span]) -> bool {
        let loc = [Seg::Name("loc".into())];
        let e = entries(&json!({ "loc": doc_geo }), [&loc[..]]);
        e.iter()
            .any(|(_, t)| spans.iter().any(|s| s.lo <= *t && *t < s.hi))
    }

    fn distance(a: &Value, b: &Value) -> f64 {
        crate::sql::spatial::call("ST_DISTANCE", Some(a), Some(b))
            .and_then(|v| v.as_f64())
            .unwrap()
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            cases: 3000,
            max_global_rejects: 100_000,
            ..Default::default()
        })]

        /// Centres everywhere, poles and the antimeridian included; radii 10 m to 2,000 km;
        /// points near the circle's edge, inside and out.
        #[test]
        fn every_point_within_the_distance_is_a_candidate(
            lon in -180.0..180.0f64, lat in -90.0..90.0f64, log_r in 1.0..6.3f64,
            reach in 0.0..1.1f64, bearing in 0.0..std::f64::consts::TAU,
        ) {
            let (c, r) = (point(lon, lat), 10f64.powf(log_r));
            let d = r * reach / 111_000.0;
            let plon = lon + d * bearing.sin() / lat.to_radians().cos().max(0.01);
            let plat = (lat + d * bearing.cos()).clamp(-90.0, 90.0);
            let p = point((plon + 180.0).rem_euclid(360.0) - 180.0, plat);
            proptest::prop_assume!(distance(&c, &p) < r);
            if let Some(spans) = spans(&c, r) {
                proptest::prop_assert!(candidate(&p, &spans), "{p} within {r} m of {c}");
            }
        }

        /// Squares of 0.0003° to 20° anywhere, points in and around them, radii 1 m to 1,000 km.
        #[test]
        fn every_shape_within_the_distance_of_a_point_is_a_candidate(
            log_size in -3.5..1.3f64, w in -179.0..159.0f64, s in -85.0..65.0f64,
            at in (-1.0..2.0f64, -1.0..2.0f64), log_r in 0.0..6.0f64,
        ) {
            let size = 10f64.powf(log_size);
            let square = json!({"type": "Polygon", "coordinates": [[[w, s], [w + size, s], [w + size, s + size], [w, s + size], [w, s]]]});
            let p = point((w + at.0 * size).clamp(-180.0, 180.0), (s + at.1 * size).clamp(-90.0, 90.0));
            let r = 10f64.powf(log_r);
            if distance(&square, &p) < r {
                if let Some(spans) = spans(&p, r) {
                    proptest::prop_assert!(candidate(&square, &spans), "{square} within {r} m of {p}");
                }
            }
            if crate::sql::spatial::call("ST_INTERSECTS", Some(&square), Some(&p)) == Some(Value::Bool(true)) {
                proptest::prop_assert!(candidate(&square, &spans(&p, 0.0).unwrap()), "{p} in {square}");
            }
        }
    }

    #[test]
    fn a_small_circle_reads_few_cells_and_skips_far_points() {
        let centre = point(-122.12, 47.66);
        let s = spans(&centre, 3000.0).unwrap();
        assert!(s.len() <= MAX_CELLS + 1);
        assert!(candidate(&point(-122.13, 47.65), &s));
        assert!(!candidate(&point(-122.5, 47.66), &s));
        assert!(!candidate(&point(2.35, 48.85), &s));
        // A region as large as the world narrows nothing.
        assert!(spans(&centre, 30_000_000.0).is_none());
        assert!(spans(&json!({"type": "Point"}), 10.0).is_none());
    }

    #[test]
    fn polygons_and_lines_are_found_by_the_cells_they_cover_or_overflow() {
        let square = |w: f64, s: f64, size: f64| json!({"type": "Polygon", "coordinates": [[[w, s], [w + size, s], [w + size, s + size], [w, s + size], [w, s]]]});
        // A small park, and a country-sized shape that overflows the fine levels.
        let park = square(-122.13, 47.65, 0.01);
        let country = square(-10.0, 40.0, 12.0);
        let probe = spans(&point(-122.125, 47.655), 0.0).unwrap();
        assert!(candidate(&park, &probe));
        assert!(!candidate(&park, &spans(&point(-5.0, 45.0), 0.0).unwrap()));
        // Too large for the fine levels, the country is filed there by its coarser cells:
        // found from inside, not from across the world.
        assert!(candidate(
            &country,
            &spans(&point(-5.0, 45.0), 0.0).unwrap()
        ));
        assert!(!candidate(&country, &probe));
        // Larger than any level can file, a shape is a candidate of every query.
        let world = json!({"type": "Polygon", "coordinates": [[[-179, -89], [179, -89], [179, 89], [-179, 89], [-179, -89]]]});
        assert!(candidate(&world, &probe));
        let line = json!({"type": "LineString", "coordinates": [[-122.2, 47.6], [-122.1, 47.7]]});
        assert!(candidate(
            &line,
            &spans(&square(-122.16, 47.64, 0.02), 0.0).unwrap()
        ));
        // Invalid geometry is not indexed.
        let loc = [Seg::Name("loc".into())];
        let bad = json!({"loc": {"type": "Point", "coordinates": [0, 95]}});
        assert!(entries(&bad, [&loc[..]]).is_empty());
    }
}

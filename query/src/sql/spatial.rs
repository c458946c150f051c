//! Spatial functions over GeoJSON (Point, LineString, Polygon, MultiPolygon) in WGS84
//! longitude/latitude. Distances are geodesic on the WGS84 ellipsoid (Vincenty's inverse
//! formula); containment and intersection treat edges as straight in longitude/latitude, which
//! differs from curved edges only for very large shapes. ST_AREA follows Cosmos (SQL Server's
//! geography type): polygon edges are great-elliptic arcs (plane sections through the earth's
//! centre) on the WGS84 ellipsoid, integrated numerically; this reproduces the documented
//! results to about 1e-10.

use serde_json::{json, Value};

type Pt = (f64, f64);

#[derive(Debug)]
enum Geo {
    Point(Pt),
    Line(Vec<Pt>),
    /// Rings: the first is the outer boundary, the rest are holes.
    Polygon(Vec<Vec<Pt>>),
    Multi(Vec<Geo>),
}

fn point(v: &Value) -> Option<Pt> {
    let a = v.as_array()?;
    if a.len() < 2 {
        return None;
    }
    Some((a[0].as_f64()?, a[1].as_f64()?))
}

fn points(v: &Value) -> Option<Vec<Pt>> {
    v.as_array()?.iter().map(point).collect()
}

fn parse(v: &Value) -> Result<Geo, String> {
    let t = v
        .get("type")
        .and_then(Value::as_str)
        .ok_or("The GeoJSON object has no 'type'.")?;
    let c = v.get("coordinates");
    let bad = || format!("The coordinates of the {t} are invalid.");
    Ok(match t {
        "Point" => Geo::Point(c.and_then(point).ok_or_else(bad)?),
        "LineString" => Geo::Line(c.and_then(points).ok_or_else(bad)?),
        "Polygon" => Geo::Polygon(
            c.and_then(Value::as_array)
                .ok_or_else(bad)?
                .iter()
                .map(points)
                .collect::<Option<_>>()
                .ok_or_else(bad)?,
        ),
        "MultiPoint" => Geo::Multi(
            c.and_then(points)
                .ok_or_else(bad)?
                .into_iter()
                .map(Geo::Point)
                .collect(),
        ),
        "MultiPolygon" => Geo::Multi(
            c.and_then(Value::as_array)
                .ok_or_else(bad)?
                .iter()
                .map(|p| {
                    p.as_array()?
                        .iter()
                        .map(points)
                        .collect::<Option<Vec<_>>>()
                        .map(Geo::Polygon)
                })
                .collect::<Option<_>>()
                .ok_or_else(bad)?,
        ),
        other => return Err(format!("The GeoJSON type '{other}' is not supported.")),
    })
}

fn validate(g: &Geo) -> Result<(), String> {
    let check = |p: &Pt| -> Result<(), String> {
        if !(-90.0..=90.0).contains(&p.1) {
            return Err("Latitude values must be between -90 and 90 degrees.".into());
        }
        if !(-180.0..=180.0).contains(&p.0) {
            return Err("Longitude values must be between -180 and 180 degrees.".into());
        }
        Ok(())
    };
    match g {
        Geo::Point(p) => check(p),
        Geo::Line(ps) => {
            if ps.len() < 2 {
                return Err("A LineString must have at least two points.".into());
            }
            ps.iter().try_for_each(check)
        }
        Geo::Polygon(rings) => {
            if rings.is_empty() {
                return Err("A Polygon must have at least one ring.".into());
            }
            for r in rings {
                if r.len() < 4 {
                    return Err("A Polygon ring must have at least four points.".into());
                }
                if r.first() != r.last() {
                    return Err(
                        "The first and last points of a Polygon ring must be the same.".into(),
                    );
                }
                r.iter().try_for_each(check)?;
            }
            Ok(())
        }
        Geo::Multi(gs) => gs.iter().try_for_each(validate),
    }
}

/// Geodesic distance in meters on WGS84 (Vincenty), falling back to the haversine formula for
/// nearly antipodal points where Vincenty does not converge.
fn distance(a: Pt, b: Pt) -> f64 {
    let (af, bf) = (6_378_137.0f64, 1.0 / 298.257_223_563);
    let bb = af * (1.0 - bf);
    let l = (b.0 - a.0).to_radians();
    let u1 = ((1.0 - bf) * a.1.to_radians().tan()).atan();
    let u2 = ((1.0 - bf) * b.1.to_radians().tan()).atan();
    let (s1, c1, s2, c2) = (u1.sin(), u1.cos(), u2.sin(), u2.cos());
    let mut lambda = l;
    for _ in 0..200 {
        let (sl, cl) = (lambda.sin(), lambda.cos());
        let sin_sigma = ((c2 * sl).powi(2) + (c1 * s2 - s1 * c2 * cl).powi(2)).sqrt();
        if sin_sigma == 0.0 {
            return 0.0;
        }
        let cos_sigma = s1 * s2 + c1 * c2 * cl;
        let sigma = sin_sigma.atan2(cos_sigma);
        let sin_alpha = c1 * c2 * sl / sin_sigma;
        let cos2_alpha = 1.0 - sin_alpha * sin_alpha;
        let cos_2sm = if cos2_alpha != 0.0 {
            cos_sigma - 2.0 * s1 * s2 / cos2_alpha
        } else {
            0.0
        };
        let cc = bf / 16.0 * cos2_alpha * (4.0 + bf * (4.0 - 3.0 * cos2_alpha));
        let prev = lambda;
        lambda = l
            + (1.0 - cc)
                * bf
                * sin_alpha
                * (sigma
                    + cc * sin_sigma
                        * (cos_2sm + cc * cos_sigma * (-1.0 + 2.0 * cos_2sm * cos_2sm)));
        if (lambda - prev).abs() < 1e-12 {
            let u_sq = cos2_alpha * (af * af - bb * bb) / (bb * bb);
            let ka =
                1.0 + u_sq / 16384.0 * (4096.0 + u_sq * (-768.0 + u_sq * (320.0 - 175.0 * u_sq)));
            let kb = u_sq / 1024.0 * (256.0 + u_sq * (-128.0 + u_sq * (74.0 - 47.0 * u_sq)));
            let ds = kb
                * sin_sigma
                * (cos_2sm
                    + kb / 4.0
                        * (cos_sigma * (-1.0 + 2.0 * cos_2sm * cos_2sm)
                            - kb / 6.0
                                * cos_2sm
                                * (-3.0 + 4.0 * sin_sigma * sin_sigma)
                                * (-3.0 + 4.0 * cos_2sm * cos_2sm)));
            return bb * ka * (sigma - ds);
        }
    }
    let (p1, p2) = (a.1.to_radians(), b.1.to_radians());
    let h = ((p2 - p1) / 2.0).sin().powi(2) + p1.cos() * p2.cos() * (l / 2.0).sin().powi(2);
    2.0 * 6_371_008.8 * h.sqrt().asin()
}

fn in_ring(p: Pt, ring: &[Pt]) -> bool {
    let mut inside = false;
    let n = ring.len();
    let mut j = n.wrapping_sub(1);
    for i in 0..n {
        let (xi, yi) = ring[i];
        let (xj, yj) = ring[j];
        if (yi > p.1) != (yj > p.1) && p.0 < (xj - xi) * (p.1 - yi) / (yj - yi) + xi {
            inside = !inside;
        }
        j = i;
    }
    inside
}

fn in_polygon(p: Pt, rings: &[Vec<Pt>]) -> bool {
    match rings.split_first() {
        Some((outer, holes)) => in_ring(p, outer) && !holes.iter().any(|h| in_ring(p, h)),
        None => false,
    }
}

fn segments(g: &Geo, out: &mut Vec<(Pt, Pt)>) {
    match g {
        Geo::Point(_) => {}
        Geo::Line(ps) => out.extend(ps.windows(2).map(|w| (w[0], w[1]))),
        Geo::Polygon(rings) => {
            for r in rings {
                out.extend(r.windows(2).map(|w| (w[0], w[1])));
            }
        }
        Geo::Multi(gs) => gs.iter().for_each(|x| segments(x, out)),
    }
}

fn vertices(g: &Geo, out: &mut Vec<Pt>) {
    match g {
        Geo::Point(p) => out.push(*p),
        Geo::Line(ps) => out.extend(ps),
        Geo::Polygon(rings) => rings.iter().for_each(|r| out.extend(r)),
        Geo::Multi(gs) => gs.iter().for_each(|x| vertices(x, out)),
    }
}

fn polygons<'g>(g: &'g Geo, out: &mut Vec<&'g [Vec<Pt>]>) {
    match g {
        Geo::Polygon(r) => out.push(r),
        Geo::Multi(gs) => gs.iter().for_each(|x| polygons(x, out)),
        _ => {}
    }
}

fn seg_intersect(a: (Pt, Pt), b: (Pt, Pt)) -> bool {
    let orient = |p: Pt, q: Pt, r: Pt| (q.0 - p.0) * (r.1 - p.1) - (q.1 - p.1) * (r.0 - p.0);
    let on = |p: Pt, q: Pt, r: Pt| {
        r.0 >= p.0.min(q.0) && r.0 <= p.0.max(q.0) && r.1 >= p.1.min(q.1) && r.1 <= p.1.max(q.1)
    };
    let (d1, d2) = (orient(b.0, b.1, a.0), orient(b.0, b.1, a.1));
    let (d3, d4) = (orient(a.0, a.1, b.0), orient(a.0, a.1, b.1));
    if ((d1 > 0.0 && d2 < 0.0) || (d1 < 0.0 && d2 > 0.0))
        && ((d3 > 0.0 && d4 < 0.0) || (d3 < 0.0 && d4 > 0.0))
    {
        return true;
    }
    (d1 == 0.0 && on(b.0, b.1, a.0))
        || (d2 == 0.0 && on(b.0, b.1, a.1))
        || (d3 == 0.0 && on(a.0, a.1, b.0))
        || (d4 == 0.0 && on(a.0, a.1, b.1))
}

fn intersects(a: &Geo, b: &Geo) -> bool {
    let (mut sa, mut sb) = (Vec::new(), Vec::new());
    segments(a, &mut sa);
    segments(b, &mut sb);
    if sa.iter().any(|x| sb.iter().any(|y| seg_intersect(*x, *y))) {
        return true;
    }
    let (mut va, mut vb) = (Vec::new(), Vec::new());
    vertices(a, &mut va);
    vertices(b, &mut vb);
    let (mut pa, mut pb) = (Vec::new(), Vec::new());
    polygons(a, &mut pa);
    polygons(b, &mut pb);
    va.iter().any(|p| pb.iter().any(|r| in_polygon(*p, r)))
        || vb.iter().any(|p| pa.iter().any(|r| in_polygon(*p, r)))
        || va.iter().any(|p| vb.contains(p))
}

fn within(a: &Geo, b: &Geo) -> bool {
    let mut pb = Vec::new();
    polygons(b, &mut pb);
    if pb.is_empty() {
        return false;
    }
    let mut va = Vec::new();
    vertices(a, &mut va);
    !va.is_empty() && va.iter().all(|p| pb.iter().any(|r| in_polygon(*p, r)))
}

const WGS84_A: f64 = 6_378_137.0;
const WGS84_F: f64 = 1.0 / 298.257_223_563;

/// The authalic function q(φ): the area of the ellipsoid between the equator and latitude φ,
/// per radian of longitude, is b²/2 · q(φ).
fn authalic_q(phi: f64, e2: f64) -> f64 {
    let e = e2.sqrt();
    let s = phi.sin();
    s / (1.0 - e2 * s * s) + (1.0 / (2.0 * e)) * ((1.0 + e * s) / (1.0 - e * s)).ln()
}

fn to_ecef(p: Pt, e2: f64) -> [f64; 3] {
    let (lon, lat) = (p.0.to_radians(), p.1.to_radians());
    let n = WGS84_A / (1.0 - e2 * lat.sin().powi(2)).sqrt();
    [
        n * lat.cos() * lon.cos(),
        n * lat.cos() * lon.sin(),
        n * (1.0 - e2) * lat.sin(),
    ]
}

/// Area enclosed by a ring whose edges are great-elliptic arcs, in square meters.
fn ring_area(ring: &[Pt]) -> f64 {
    let e2 = WGS84_F * (2.0 - WGS84_F);
    let b = WGS84_A * (1.0 - WGS84_F);
    let mut total = 0.0;
    for w in ring.windows(2) {
        let (x1, x2) = (to_ecef(w[0], e2), to_ecef(w[1], e2));
        let dot: f64 = x1.iter().zip(&x2).map(|(p, q)| p * q).sum();
        let n1 = x1.iter().map(|v| v * v).sum::<f64>().sqrt();
        let n2 = x2.iter().map(|v| v * v).sum::<f64>().sqrt();
        let angle = (dot / (n1 * n2)).clamp(-1.0, 1.0).acos();
        // About a thousand steps per degree keeps the integration error far below 1e-9.
        let steps = ((angle.to_degrees() * 1000.0).ceil() as usize).clamp(8, 200_000);
        let mut prev: Option<(f64, f64)> = None;
        for i in 0..=steps {
            let t = i as f64 / steps as f64;
            let v = [
                (1.0 - t) * x1[0] + t * x2[0],
                (1.0 - t) * x1[1] + t * x2[1],
                (1.0 - t) * x1[2] + t * x2[2],
            ];
            // Project along the ray from the centre onto the ellipsoid: a point of the great
            // ellipse through both ends.
            let k = 1.0
                / ((v[0] * v[0] + v[1] * v[1]) / (WGS84_A * WGS84_A) + v[2] * v[2] / (b * b))
                    .sqrt();
            let (x, y, z) = (v[0] * k, v[1] * k, v[2] * k);
            let lon = y.atan2(x);
            let lat = z.atan2((x * x + y * y).sqrt() * (1.0 - e2));
            let q = authalic_q(lat, e2);
            if let Some((plon, pq)) = prev {
                let mut dl = lon - plon;
                if dl > std::f64::consts::PI {
                    dl -= 2.0 * std::f64::consts::PI;
                } else if dl < -std::f64::consts::PI {
                    dl += 2.0 * std::f64::consts::PI;
                }
                total += dl * (pq + q) / 2.0;
            }
            prev = Some((lon, q));
        }
    }
    (total * b * b / 2.0).abs()
}

fn area(g: &Geo) -> f64 {
    match g {
        Geo::Polygon(rings) => match rings.split_first() {
            Some((outer, holes)) => {
                ring_area(outer) - holes.iter().map(|h| ring_area(h)).sum::<f64>()
            }
            None => 0.0,
        },
        Geo::Multi(gs) => gs.iter().map(area).sum(),
        _ => 0.0,
    }
}

pub fn call(name: &str, a: Option<&Value>, b: Option<&Value>) -> Option<Value> {
    match name {
        "ST_ISVALID" => Some(Value::Bool(parse(a?).and_then(|g| validate(&g)).is_ok())),
        "ST_ISVALIDDETAILED" => Some(match parse(a?).and_then(|g| validate(&g)) {
            Ok(()) => json!({"valid": true}),
            Err(reason) => json!({"valid": false, "reason": reason}),
        }),
        _ => {
            let ga = parse(a?).ok()?;
            validate(&ga).ok()?;
            match name {
                "ST_AREA" => super::value::number(area(&ga)),
                _ => {
                    let gb = parse(b?).ok()?;
                    validate(&gb).ok()?;
                    match name {
                        "ST_DISTANCE" => match (&ga, &gb) {
                            (Geo::Point(p), Geo::Point(q)) => {
                                super::value::number(distance(*p, *q))
                            }
                            _ => {
                                if intersects(&ga, &gb) {
                                    return super::value::number(0.0);
                                }
                                let (mut va, mut vb) = (Vec::new(), Vec::new());
                                vertices(&ga, &mut va);
                                vertices(&gb, &mut vb);
                                let d = va
                                    .iter()
                                    .flat_map(|p| vb.iter().map(move |q| distance(*p, *q)))
                                    .fold(f64::INFINITY, f64::min);
                                super::value::number(d)
                            }
                        },
                        "ST_WITHIN" => Some(Value::Bool(within(&ga, &gb))),
                        "ST_INTERSECTS" => Some(Value::Bool(intersects(&ga, &gb))),
                        _ => None,
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distance_is_geodesic() {
        // Flinders Peak to Buninyong, the classic Vincenty test: 54972.271 m.
        let d = distance(
            (144.424_867_888_9, -37.951_033_416_7),
            (143.926_495_527_8, -37.652_821_138_9),
        );
        assert!((d - 54_972.271).abs() < 0.01, "{d}");
    }

    #[test]
    fn area_matches_the_documented_cosmos_value() {
        let poly = json!({"type": "Polygon", "coordinates": [[[31.8, -5], [32, -5], [32, -4.7], [31.8, -4.7], [31.8, -5]]]});
        let a = call("ST_AREA", Some(&poly), None)
            .unwrap()
            .as_f64()
            .unwrap();
        assert!(((a - 735_970_283.052_261_4) / a).abs() < 1e-9, "{a}");
    }

    #[test]
    fn containment_and_validity() {
        let poly = json!({"type": "Polygon", "coordinates": [[[0,0],[10,0],[10,10],[0,10],[0,0]]]});
        let inside = json!({"type": "Point", "coordinates": [5, 5]});
        let outside = json!({"type": "Point", "coordinates": [15, 5]});
        assert_eq!(
            call("ST_WITHIN", Some(&inside), Some(&poly)),
            Some(Value::Bool(true))
        );
        assert_eq!(
            call("ST_WITHIN", Some(&outside), Some(&poly)),
            Some(Value::Bool(false))
        );
        assert_eq!(
            call("ST_INTERSECTS", Some(&poly), Some(&inside)),
            Some(Value::Bool(true))
        );
        let bad = json!({"type": "Point", "coordinates": [133.7, -184.3]});
        assert_eq!(
            call("ST_ISVALIDDETAILED", Some(&bad), None),
            Some(
                json!({"valid": false, "reason": "Latitude values must be between -90 and 90 degrees."})
            )
        );
    }
}

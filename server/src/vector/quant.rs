//! Scalar quantization: each dimension scaled to `i8` by the largest magnitude it takes in
//! the vectors the quantizer was trained on, outliers left out (values beyond it clip).
//! A vector whose length is far beyond the others' — one legal `[1e30, 1e30, 1e30]` — would
//! otherwise set every dimension's step so wide that all the other vectors code to 0 and the
//! index loses its recall; left out of training it only clips, and the exact re-rank still
//! scores it exactly. A quantized vector takes a
//! quarter of its `f32` bytes and its dot product with a quantized query is an integer kernel
//! about three times faster than the `f32` one; candidates found that way are re-ranked with
//! the exact vectors.

use super::kernels;

/// How many times the typical length a row may be and still shape the scales.
pub const OUTLIER: f32 = 64.0;

/// Per-dimension scales.
#[derive(Debug, Clone)]
pub struct Quantizer {
    /// Value of one code step per dimension (`max |v_d| / 127`).
    scale: Vec<f32>,
    /// `1 / scale`, or 0 where a dimension was always 0.
    inv: Vec<f32>,
}

/// A query prepared for [`Quantizer`] codes: `q·v ≈ step · Σ codes·code(v)`.
#[derive(Debug, Clone)]
pub struct QueryCode {
    pub codes: Vec<i8>,
    pub step: f32,
}

impl QueryCode {
    /// About `q·v` for the code of `v`.
    pub fn dot(&self, code: &[i8]) -> f32 {
        self.step * kernels::dot_i8(&self.codes, code) as f32
    }
}

impl Quantizer {
    /// Writes the scales (see [`super::codec`]).
    pub fn write<W: std::io::Write>(&self, w: &mut super::codec::Writer<W>) -> std::io::Result<()> {
        w.f32s(&self.scale)
    }

    /// Whether the scales are for `dims` dimensions, each a finite step.
    pub fn fits(&self, dims: usize) -> bool {
        self.scale.len() == dims && self.scale.iter().all(|s| s.is_finite() && *s >= 0.0)
    }

    /// Reads what [`Quantizer::write`] wrote.
    pub fn read<R: std::io::Read>(r: &mut super::codec::Reader<R>) -> std::io::Result<Self> {
        let scale = r.f32s()?;
        let inv = scale
            .iter()
            .map(|s| if *s > 0.0 { 1.0 / s } else { 0.0 })
            .collect();
        Ok(Self { scale, inv })
    }

    /// Scales fitted to `vectors` (each of `dims` values), leaving out rows with a value
    /// that is not finite and rows longer than [`OUTLIER`] times the median length (or, when
    /// most rows are zero, than that times the 90th percentile length).
    pub fn train<'a>(dims: usize, vectors: impl Iterator<Item = &'a [f32]> + Clone) -> Self {
        let mut lengths: Vec<f32> = vectors
            .clone()
            .filter(|v| v.iter().all(|x| x.is_finite()))
            .map(|v| kernels::dot(v, v).sqrt())
            .filter(|l| l.is_finite())
            .collect();
        lengths.sort_by(f32::total_cmp);
        let at = |q: f64| {
            lengths
                .get(((lengths.len() as f64 - 1.0) * q) as usize)
                .copied()
        };
        let typical = at(0.5)
            .filter(|m| *m > 0.0)
            .or_else(|| at(0.9))
            .unwrap_or(0.0);
        let bound = if typical > 0.0 {
            typical * OUTLIER
        } else {
            f32::INFINITY
        };
        let mut max = vec![0f32; dims];
        for v in vectors {
            if !v.iter().all(|x| x.is_finite()) || kernels::dot(v, v).sqrt() > bound {
                continue;
            }
            for (m, x) in max.iter_mut().zip(v) {
                *m = m.max(x.abs());
            }
        }
        let scale: Vec<f32> = max.iter().map(|m| m / 127.0).collect();
        let inv = scale
            .iter()
            .map(|s| if *s > 0.0 { 1.0 / s } else { 0.0 })
            .collect();
        Self { scale, inv }
    }

    /// Writes the codes of `v` into `out` (both of the trained length).
    pub fn encode(&self, v: &[f32], out: &mut [i8]) {
        for ((o, x), inv) in out.iter_mut().zip(v).zip(&self.inv) {
            // NaN (an infinite value times a zero scale) codes to 0, like a dimension unseen.
            *o = (x * inv).round().clamp(-127.0, 127.0) as i8;
        }
    }

    /// `q` weighted by the scales and quantized itself, so that a dot product with stored
    /// codes is one integer kernel.
    pub fn query(&self, q: &[f32]) -> QueryCode {
        let weighted: Vec<f32> = q.iter().zip(&self.scale).map(|(x, s)| x * s).collect();
        let top = weighted.iter().fold(0f32, |m, x| m.max(x.abs()));
        if top == 0.0 {
            return QueryCode {
                codes: vec![0; q.len()],
                step: 0.0,
            };
        }
        let step = top / 127.0;
        let codes = weighted
            .iter()
            .map(|x| (x / step).round().clamp(-127.0, 127.0) as i8)
            .collect();
        QueryCode { codes, step }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Quantized dot products stay within a small error of the exact ones.
    #[test]
    fn quantized_dot_products_are_close() {
        let dims = 64;
        let vs: Vec<Vec<f32>> = (0..50)
            .map(|i| {
                (0..dims)
                    .map(|d| ((i * 31 + d * 7) as f32 * 0.13).sin() * (1.0 + d as f32 / 10.0))
                    .collect()
            })
            .collect();
        let q = Quantizer::train(dims, vs.iter().map(|v| v.as_slice()));
        let query = q.query(&vs[3]);
        let mut code = vec![0i8; dims];
        for v in &vs {
            q.encode(v, &mut code);
            let exact = kernels::dot(&vs[3], v);
            let norm = kernels::dot(&vs[3], &vs[3]).sqrt() * kernels::dot(v, v).sqrt();
            assert!(
                (query.dot(&code) - exact).abs() < 0.02 * norm,
                "{} vs {exact}",
                query.dot(&code)
            );
        }
    }

    /// One vector a thousand-billion-billion times longer than the rest leaves their codes
    /// as they were without it.
    #[test]
    fn an_outlier_does_not_widen_the_scales() {
        let dims = 16;
        let vs: Vec<Vec<f32>> = (0..200)
            .map(|i| {
                (0..dims)
                    .map(|d| ((i * 13 + d * 5) as f32 * 0.21).cos())
                    .collect()
            })
            .collect();
        let plain = Quantizer::train(dims, vs.iter().map(|v| v.as_slice()));
        let mut with = vs.clone();
        with.insert(7, vec![1e30; dims]);
        with.push(vec![f32::INFINITY; dims]);
        let robust = Quantizer::train(dims, with.iter().map(|v| v.as_slice()));
        assert_eq!(plain.scale, robust.scale);
        let mut code = vec![0i8; dims];
        robust.encode(&with[7], &mut code);
        assert!(
            code.iter().all(|c| *c == 127),
            "the outlier clips: {code:?}"
        );
        // All-zero rows (most of them) do not make every other row an outlier.
        let mut zeros = vec![vec![0f32; dims]; 300];
        zeros.extend(vs.iter().cloned());
        let z = Quantizer::train(dims, zeros.iter().map(|v| v.as_slice()));
        assert_eq!(z.scale, plain.scale);
    }
}

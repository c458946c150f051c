//! The distance functions of `VectorDistance` and of vector policies: one type for the
//! policy, the evaluator and the server's vector indexes.

/// How two vectors' distance is measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Distance {
    Cosine,
    DotProduct,
    Euclidean,
}

impl Distance {
    /// The distance function a name spells (any case), as `distanceFunction` takes it.
    pub fn parse(name: &str) -> Option<Self> {
        match name.to_ascii_lowercase().as_str() {
            "cosine" => Some(Distance::Cosine),
            "dotproduct" => Some(Distance::DotProduct),
            "euclidean" => Some(Distance::Euclidean),
            _ => None,
        }
    }

    /// The name the service spells it with.
    pub fn name(self) -> &'static str {
        match self {
            Distance::Cosine => "cosine",
            Distance::DotProduct => "dotproduct",
            Distance::Euclidean => "euclidean",
        }
    }

    /// `VectorDistance`'s score of two vectors of equal length, exactly (in `f64`): the
    /// similarity for cosine and dot product, the distance for euclidean; `None` for cosine
    /// with a zero vector. The vector indexes compute the same functions over `f32` rows
    /// (`server/src/vector/kernels.rs`), ordered so that smaller is nearer.
    ///
    /// `x` may be `f32` numbers (an index's row): each is widened to `f64` where the sums take
    /// it, so the result is bit for bit the score of the same numbers given as `f64`.
    pub fn score<X: Copy + Into<f64>>(self, x: &[X], y: &[f64]) -> Option<f64> {
        match self {
            Distance::DotProduct => Some(x.iter().zip(y).map(|(&p, q)| p.into() * q).sum()),
            Distance::Euclidean => Some(
                x.iter()
                    .zip(y)
                    .map(|(&p, q)| (p.into() - q) * (p.into() - q))
                    .sum::<f64>()
                    .sqrt(),
            ),
            Distance::Cosine => {
                // The three sums in one pass: each is still added in order (so the same bits
                // as three passes), and the three chains of additions overlap in the CPU
                // instead of each waiting on its own — a 768-number score took three times
                // as long.
                let (mut dot, mut nx, mut ny) = (-0.0f64, -0.0f64, -0.0f64);
                for (&p, &q) in x.iter().zip(y) {
                    let p: f64 = p.into();
                    dot += p * q;
                    nx += p * p;
                    ny += q * q;
                }
                let n = x.len().min(y.len());
                nx = x[n..].iter().fold(nx, |a, &p| a + p.into() * p.into());
                ny = y[n..].iter().fold(ny, |a, q| a + q * q);
                let (nx, ny) = (nx.sqrt(), ny.sqrt());
                (nx != 0.0 && ny != 0.0).then(|| dot / (nx * ny))
            }
        }
    }
}

/// The value `VectorDistance` takes for a document whose score ([`Distance::score`] of its
/// vector and the query's, in that order) is `score`: the evaluator's own conversion, so that
/// an index that computes the score from the same numbers gives the same ORDER BY key.
pub fn score_key(score: Option<f64>) -> Option<serde_json::Value> {
    score.and_then(super::value::number)
}

#[cfg(test)]
mod tests {
    use super::Distance;

    #[test]
    fn names_parse_and_scores_are_the_documented_functions() {
        for d in [Distance::Cosine, Distance::DotProduct, Distance::Euclidean] {
            assert_eq!(Distance::parse(&d.name().to_uppercase()), Some(d));
        }
        assert_eq!(Distance::parse("manhattan"), None);
        let (x, y) = ([3.0, 4.0], [4.0, 3.0]);
        assert_eq!(Distance::DotProduct.score(&x, &y), Some(24.0));
        assert_eq!(Distance::Euclidean.score(&x, &y), Some(2f64.sqrt()));
        assert_eq!(Distance::Cosine.score(&x, &y), Some(24.0 / 25.0));
        assert_eq!(Distance::Cosine.score(&[0.0, 0.0], &y), None);
        // The one-pass cosine is the three ordered sums of its definition, to the bit, at
        // equal and unequal lengths.
        let xs: Vec<f64> = (0..771)
            .map(|i| (f64::from(i) * 0.731).sin() * 1e3)
            .collect();
        let ys: Vec<f64> = (0..768)
            .map(|i| (f64::from(i) * 0.117).cos() / 7.0)
            .collect();
        for (x, y) in [
            (&xs[..768], &ys[..]),
            (&xs[..], &ys[..]),
            (&ys[..], &xs[..]),
        ] {
            let dot: f64 = x.iter().zip(y).map(|(p, q)| p * q).sum();
            let nx = x.iter().map(|p| p * p).sum::<f64>().sqrt();
            let ny = y.iter().map(|q| q * q).sum::<f64>().sqrt();
            assert_eq!(
                Distance::Cosine.score(x, y).map(f64::to_bits),
                Some((dot / (nx * ny)).to_bits())
            );
        }
        // f32 numbers score as the same numbers widened.
        let (a, b) = ([0.1f32, -2.7, 3.3e-3], [0.7, 1.1, -0.25]);
        let wide = a.map(f64::from);
        for d in [Distance::Cosine, Distance::DotProduct, Distance::Euclidean] {
            assert_eq!(
                d.score(&a, &b).map(f64::to_bits),
                d.score(&wide, &b).map(f64::to_bits)
            );
        }
    }
}

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
        let dot: f64 = x.iter().zip(y).map(|(&p, q)| p.into() * q).sum();
        match self {
            Distance::DotProduct => Some(dot),
            Distance::Euclidean => Some(
                x.iter()
                    .zip(y)
                    .map(|(&p, q)| (p.into() - q) * (p.into() - q))
                    .sum::<f64>()
                    .sqrt(),
            ),
            Distance::Cosine => {
                let nx = x.iter().map(|&p| p.into() * p.into()).sum::<f64>().sqrt();
                let ny = y.iter().map(|p| p * p).sum::<f64>().sqrt();
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

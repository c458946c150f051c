//! Full-text analysis and scoring as the service's full-text search defines them: text is
//! split into words, lower-cased, stripped of its language's stop words and stemmed (the
//! Snowball stemmers), and `FullTextScore` is BM25 over those terms.
//!
//! The same analysis serves the evaluator (`FullTextContains*`, `FullTextScore`), the
//! statistics a hybrid query gathers first (`_FullTextWordCount`, hit counts), and the
//! server's postings, so a term means the same thing everywhere.

use rust_stemmers::{Algorithm, Stemmer};
use std::collections::HashSet;
use std::sync::OnceLock;

/// BM25's term-frequency saturation and length normalisation (the usual defaults, which the
/// service documents as standard BM25).
pub const K1: f64 = 1.2;
pub const B: f64 = 0.75;

/// The languages the service analyses text in (`fullTextPolicy` languages).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Language {
    #[default]
    EnUs,
    DeDe,
    EsEs,
    FrFr,
    ItIt,
    PtBr,
    PtPt,
}

/// Every language, in the order the service's documentation lists them.
pub const LANGUAGES: [Language; 7] = [
    Language::EnUs,
    Language::DeDe,
    Language::EsEs,
    Language::FrFr,
    Language::ItIt,
    Language::PtBr,
    Language::PtPt,
];

impl Language {
    /// The language a policy names (`"en-US"`, case-insensitive), if the service supports it.
    pub fn parse(s: &str) -> Option<Language> {
        LANGUAGES
            .into_iter()
            .find(|l| l.code().eq_ignore_ascii_case(s))
    }

    pub fn code(self) -> &'static str {
        match self {
            Language::EnUs => "en-US",
            Language::DeDe => "de-DE",
            Language::EsEs => "es-ES",
            Language::FrFr => "fr-FR",
            Language::ItIt => "it-IT",
            Language::PtBr => "pt-BR",
            Language::PtPt => "pt-PT",
        }
    }

    fn index(self) -> usize {
        LANGUAGES.iter().position(|l| *l == self).unwrap_or(0)
    }

    fn iso(self) -> &'static str {
        &self.code()[..2]
    }

    fn algorithm(self) -> Algorithm {
        match self {
            Language::EnUs => Algorithm::English,
            Language::DeDe => Algorithm::German,
            Language::EsEs => Algorithm::Spanish,
            Language::FrFr => Algorithm::French,
            Language::ItIt => Algorithm::Italian,
            Language::PtBr | Language::PtPt => Algorithm::Portuguese,
        }
    }
}

/// A language's stemmer and stop words, built once.
struct Analyzer {
    stemmer: Stemmer,
    stop: HashSet<String>,
}

fn analyzer(lang: Language) -> &'static Analyzer {
    static ALL: OnceLock<Vec<Analyzer>> = OnceLock::new();
    let all = ALL.get_or_init(|| {
        LANGUAGES
            .iter()
            .map(|l| Analyzer {
                stemmer: Stemmer::create(l.algorithm()),
                stop: stop_words::get(l.iso()).into_iter().collect(),
            })
            .collect()
    });
    &all[lang.index()]
}

/// The terms of `text`: its words (runs of letters and digits), lower-cased, without stop
/// words, stemmed.
pub fn analyze(text: &str, lang: Language) -> Vec<String> {
    let a = analyzer(lang);
    let kept = kept_stems();
    let stems = &kept.langs[lang.index()];
    let mut out = Vec::new();
    let mut lower;
    for word in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        let word = if word
            .bytes()
            .all(|b| b.is_ascii() && !b.is_ascii_uppercase())
        {
            word
        } else {
            lower = word.to_lowercase();
            lower.as_str()
        };
        if let Some(stem) = stems.get(word) {
            out.extend(stem.value().clone());
            continue;
        }
        let stem = (!a.stop.contains(word)).then(|| a.stemmer.stem(word).into_owned());
        if word.len() <= KEPT_STEM_BYTES {
            kept.keep(stems, word, &stem);
        }
        out.extend(stem);
    }
    out
}

/// Words kept stemmed, at most, over every language (a few megabytes); then forgotten all at
/// once.
const KEPT_STEMS: usize = 65_536;
/// The longest word kept stemmed.
const KEPT_STEM_BYTES: usize = 32;

type StemMap = dashmap::DashMap<String, Option<String>, xxhash_rust::xxh3::Xxh3DefaultBuilder>;

/// Lower-cased words analysed lately, per language: the stem, or `None` for a stop word. Text's
/// words follow Zipf's law, so nearly every word of a document was stemmed moments before; a
/// lookup costs a fraction of a Snowball run, which was half of an indexed write's analysis.
/// One map for the process, not one per thread: writes and queries analyse on the blocking
/// pool's threads, up to hundreds of them, and a map each would bound nothing.
struct KeptStems {
    langs: Vec<StemMap>,
    count: std::sync::atomic::AtomicUsize,
}

impl KeptStems {
    fn keep(&self, stems: &StemMap, word: &str, stem: &Option<String>) {
        use std::sync::atomic::Ordering::Relaxed;
        if self.count.fetch_add(1, Relaxed) >= KEPT_STEMS {
            for m in &self.langs {
                m.clear();
            }
            self.count.store(1, Relaxed);
        }
        stems.insert(word.to_string(), stem.clone());
    }
}

fn kept_stems() -> &'static KeptStems {
    static KEPT: OnceLock<KeptStems> = OnceLock::new();
    KEPT.get_or_init(|| KeptStems {
        langs: LANGUAGES.iter().map(|_| StemMap::default()).collect(),
        count: std::sync::atomic::AtomicUsize::new(0),
    })
}

/// Analyses kept while one document is evaluated, by a hash of the text and its language: a
/// query that reads the same text in several places — rank fusion's components, the
/// statistics query's word count and hit counts, `FullTextContains*` beside `FullTextScore`
/// — analyses it once per document, not once per call (50 components over one 2 MB text
/// were 150 analyses of it). Forgotten when the next document starts
/// ([`forget_document`]), and never more than [`MAX_KEPT_ANALYSES`] bytes.
struct Kept {
    bytes: usize,
    texts: Vec<(u128, Language, std::rc::Rc<Vec<String>>)>,
}

/// The most bytes of analyses one thread keeps for the document it evaluates.
pub const MAX_KEPT_ANALYSES: usize = 32 << 20;

/// Search terms (short texts) kept analysed across documents, at most this many per thread.
const KEPT_TERMS: usize = 4096;
/// The longest text kept as a search term.
const TERM_BYTES: usize = 256;

thread_local! {
    static KEPT: std::cell::RefCell<Kept> = const {
        std::cell::RefCell::new(Kept { bytes: 0, texts: Vec::new() })
    };
    #[allow(clippy::type_complexity)]
    static TERMS: std::cell::RefCell<std::collections::HashMap<(String, Language), std::rc::Rc<Vec<String>>>> =
        std::cell::RefCell::new(std::collections::HashMap::new());
}

/// [`analyze`], shared with earlier calls on the same text while one document is evaluated
/// (and, for a short search term, across documents).
pub fn analyzed(text: &str, lang: Language) -> std::rc::Rc<Vec<String>> {
    if text.len() <= TERM_BYTES {
        return TERMS.with(|t| {
            let mut t = t.borrow_mut();
            if let Some(a) = t.get(&(text.to_string(), lang)) {
                return std::rc::Rc::clone(a);
            }
            if t.len() >= KEPT_TERMS {
                t.clear();
            }
            let a = std::rc::Rc::new(analyze(text, lang));
            t.insert((text.to_string(), lang), std::rc::Rc::clone(&a));
            a
        });
    }
    let key = xxhash_rust::xxh3::xxh3_128(text.as_bytes());
    KEPT.with(|k| {
        let mut k = k.borrow_mut();
        if let Some((_, _, a)) = k.texts.iter().find(|(h, l, _)| *h == key && *l == lang) {
            return std::rc::Rc::clone(a);
        }
        let a = std::rc::Rc::new(analyze(text, lang));
        let bytes = a.iter().map(|w| w.len() + 24).sum::<usize>() + 64;
        if k.bytes + bytes > MAX_KEPT_ANALYSES {
            k.texts.clear();
            k.bytes = 0;
        }
        if bytes <= MAX_KEPT_ANALYSES {
            k.bytes += bytes;
            k.texts.push((key, lang, std::rc::Rc::clone(&a)));
        }
        a
    })
}

/// Forgets the analyses of the document evaluated last (a new one starts).
pub fn forget_document() {
    KEPT.with(|k| {
        if let Ok(mut k) = k.try_borrow_mut() {
            k.texts.clear();
            k.bytes = 0;
        }
    });
}

/// How often `phrase` (consecutive terms) occurs in `doc`. An empty phrase (only stop words)
/// occurs nowhere.
pub fn occurrences(doc: &[String], phrase: &[String]) -> usize {
    if phrase.is_empty() || phrase.len() > doc.len() {
        return 0;
    }
    doc.windows(phrase.len()).filter(|w| *w == phrase).count()
}

/// The statistics BM25 reads for one scored path: how many documents the scope holds, how
/// many terms their texts hold together, and in how many documents each search term occurs.
#[derive(Debug, Clone, PartialEq)]
pub struct Statistics {
    pub documents: u64,
    pub total_words: u64,
    pub hits: Vec<u64>,
}

/// One term's part of BM25: the `i`-th search term occurring `tf` times in a document of
/// `dl` terms (what a posting holds).
pub fn bm25_term(tf: u32, dl: u32, i: usize, stats: &Statistics) -> f64 {
    TermWeight::new(i, stats).score(tf, dl)
}

/// The `i`-th search term's BM25 weights under `stats`, worked out once for the many
/// postings a ranking scores: [`bm25_term`] is this arithmetic, so every path that scores
/// (evaluation, the index, the SDKs' per-partition plan) gets the same bits.
#[derive(Debug, Clone, Copy)]
pub struct TermWeight {
    /// idf · (k1 + 1).
    scale: f64,
    /// k1 · (1 − b).
    base: f64,
    /// k1 · b / avgdl: the length normalisation's share per word of the document.
    per_word: f64,
}

impl TermWeight {
    pub fn new(i: usize, stats: &Statistics) -> Self {
        let n_docs = stats.documents.max(1) as f64;
        let avgdl = if stats.total_words == 0 {
            1.0
        } else {
            stats.total_words as f64 / n_docs
        };
        let n = (stats.hits.get(i).copied().unwrap_or(0) as f64).min(n_docs);
        let idf = (1.0 + (n_docs - n + 0.5) / (n + 0.5)).ln();
        Self {
            scale: idf * (K1 + 1.0),
            base: K1 * (1.0 - B),
            per_word: K1 * B / avgdl,
        }
    }

    /// The term's score in a document of `dl` terms where it occurs `tf` times:
    /// idf · tf · (k1 + 1) / (tf + k1 · (1 − b + b · dl / avgdl)), with one division — a
    /// ranking scores thousands of postings per query, and a division's latency was most of
    /// a posting's cost. Rises with `tf`, falls (or stays) as `dl` grows, as rounding keeps
    /// each step monotone: what the index's impact order relies on.
    #[inline]
    pub fn score(&self, tf: u32, dl: u32) -> f64 {
        if tf == 0 {
            return 0.0;
        }
        let tf = f64::from(tf);
        self.scale * tf / (tf + self.base + self.per_word * f64::from(dl))
    }
}

/// BM25 of a document's terms for the search `terms` (each a phrase) under `stats`:
/// Σ idf(t) · tf·(k1+1) / (tf + k1·(1 − b + b·|d|/avgdl)), idf(t) = ln(1 + (N − n + ½)/(n + ½)).
pub fn bm25(doc: &[String], terms: &[Vec<String>], stats: &Statistics) -> f64 {
    let mut score = 0.0;
    for (i, t) in terms.iter().enumerate() {
        score += bm25_term(occurrences(doc, t) as u32, doc.len() as u32, i, stats);
    }
    score
}

#[cfg(test)]
mod tests {
    use super::*;

    fn en(s: &str) -> Vec<String> {
        analyze(s, Language::EnUs)
    }

    #[test]
    fn words_are_lowered_stemmed_and_stop_words_dropped() {
        assert_eq!(en("The runners were Running!"), ["runner", "run"]);
        assert_eq!(en("John's bicycles"), ["john", "bicycl"]);
        // A longer word is another term: "Johnson" does not contain "John".
        assert_eq!(en("Bill Johnson"), ["bill", "johnson"]);
        assert_eq!(analyze("Die Häuser", Language::DeDe), ["haus"]);
        assert_eq!(Language::parse("fr-fr"), Some(Language::FrFr));
        assert_eq!(Language::parse("xx-YY"), None);
    }

    /// Words stemmed before answer from the kept stems exactly as the stemmer does,
    /// per language (one word, two languages' stems), and stop words stay dropped.
    #[test]
    fn kept_stems_answer_as_the_stemmer() {
        let text = "The Häuser häuser RUNNING running the";
        let fresh: Vec<String> = ["häuser", "häuser", "running", "running"]
            .iter()
            .map(|w| analyzer(Language::EnUs).stemmer.stem(w).into_owned())
            .collect();
        for _ in 0..2 {
            assert_eq!(en(text), fresh);
            assert_eq!(analyze("häuser die", Language::DeDe), ["haus"]);
        }
        kept_stems().langs[0].insert("zzqxkept".into(), Some("kept".into()));
        assert_eq!(en("zzqxkept"), ["kept"], "the kept stem is what answers");
    }

    #[test]
    fn phrases_count_consecutive_terms() {
        let doc = en("the United States of America and the united states navy");
        assert_eq!(occurrences(&doc, &en("United States")), 2);
        assert_eq!(occurrences(&doc, &en("states united")), 0);
        assert_eq!(
            occurrences(&doc, &en("the")),
            0,
            "stop words alone match nothing"
        );
    }

    #[test]
    fn bm25_prefers_rare_terms_short_documents_and_repeats() {
        let stats = Statistics {
            documents: 100,
            total_words: 1000,
            hits: vec![2, 50],
        };
        let rare = vec![en("swim")];
        let common = vec![en("run")];
        let short = en("swim run");
        let long = en("swim run walk jog hike climb row sail ski skate");
        let rare_stats = Statistics {
            hits: vec![2],
            ..stats.clone()
        };
        let common_stats = Statistics {
            hits: vec![50],
            ..stats.clone()
        };
        assert!(bm25(&short, &rare, &rare_stats) > bm25(&short, &common, &common_stats));
        assert!(bm25(&short, &rare, &rare_stats) > bm25(&long, &rare, &rare_stats));
        let twice = en("swim swim run");
        assert!(bm25(&twice, &rare, &rare_stats) > bm25(&short, &rare, &rare_stats));
        assert_eq!(bm25(&en("walk"), &rare, &rare_stats), 0.0);
        // One occurrence in a document of average length, exactly.
        let avg = en("swim a2 a3 a4 a5 a6 a7 a8 a9 a10");
        let idf = (1.0f64 + (100.0 - 2.0 + 0.5) / 2.5).ln();
        let want = idf * 2.2 / (1.0 + 1.2);
        assert!((bm25(&avg, &rare, &rare_stats) - want).abs() < 1e-12);
    }

    #[test]
    fn a_text_is_analysed_once_per_document() {
        let text = "the quick brown fox ".repeat(100);
        let a = analyzed(&text, Language::default());
        let b = analyzed(&text, Language::default());
        assert!(std::rc::Rc::ptr_eq(&a, &b));
        assert_eq!(*a, analyze(&text, Language::default()));
        forget_document();
        assert!(!std::rc::Rc::ptr_eq(
            &a,
            &analyzed(&text, Language::default())
        ));
        let t = analyzed("foxes", Language::default());
        forget_document();
        assert!(
            std::rc::Rc::ptr_eq(&t, &analyzed("foxes", Language::default())),
            "terms are kept"
        );
    }
}

//! A small Prometheus registry with what upstream's exposition needs and `prometheus-client`
//! lacks: summaries, label names fixed per family (so a call site cannot invent a label), a
//! descriptor per family (for the test that compares ours with upstream's list), deletion by
//! partial label match (operatorpkg's), and the text format as Go's client writes it (labels
//! sorted by name, numbers as Go formats them, empty families left out).

use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use tokio::time::Instant;

/// Label pairs, in any order (see [`Family::get_or_create`]).
pub type Labels = Vec<(String, String)>;

/// A metric's type, as `# TYPE` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// Only goes up.
    Counter,
    /// Any value.
    Gauge,
    /// Observations counted into fixed buckets.
    Histogram,
    /// Observations summarised by quantiles over a sliding window.
    Summary,
}

impl Kind {
    /// The name the exposition and upstream's reference use.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
            Kind::Summary => "summary",
        }
    }
}

/// What a family is: name, help, type, label names, and buckets or quantiles.
#[derive(Clone, Debug, PartialEq)]
pub struct Desc {
    /// The full name (a counter's with its `_total`).
    pub name: String,
    /// `# HELP`.
    pub help: String,
    /// `# TYPE`.
    pub kind: Kind,
    /// Label names, in the order [`Family::with`] takes values.
    pub labels: Vec<String>,
    /// A histogram's upper bounds (without `+Inf`).
    pub buckets: Vec<f64>,
    /// A summary's quantiles.
    pub quantiles: Vec<f64>,
}

/// A value a [`Family`] holds per label set.
pub trait Metric: Send + Sync + 'static {
    /// A new one for a family described by `desc`.
    fn new(desc: &Desc) -> Self;
    /// Writes its sample lines; `labels` is the series' `k="v"` list, sorted, maybe empty.
    fn encode(&self, out: &mut String, desc: &Desc, labels: &str);
}

/// A counter.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    /// Adds one.
    pub fn inc(&self) {
        self.inc_by(1);
    }
    /// Adds `n`.
    pub fn inc_by(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }
    /// The count.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

impl Metric for Counter {
    fn new(_: &Desc) -> Self {
        Self::default()
    }
    fn encode(&self, out: &mut String, desc: &Desc, labels: &str) {
        sample(out, &desc.name, "", labels, self.get() as f64);
    }
}

/// A gauge.
#[derive(Debug, Default)]
pub struct Gauge(AtomicU64);

impl Gauge {
    /// Sets it.
    pub fn set(&self, v: f64) {
        self.0.store(v.to_bits(), Ordering::Relaxed);
    }
    /// The value.
    pub fn get(&self) -> f64 {
        f64::from_bits(self.0.load(Ordering::Relaxed))
    }
}

impl Metric for Gauge {
    fn new(_: &Desc) -> Self {
        Self::default()
    }
    fn encode(&self, out: &mut String, desc: &Desc, labels: &str) {
        sample(out, &desc.name, "", labels, self.get());
    }
}

/// A histogram with fixed buckets.
#[derive(Debug)]
pub struct Histogram {
    bounds: Arc<[f64]>,
    state: Mutex<HistogramState>,
}

#[derive(Debug, Default)]
struct HistogramState {
    /// Per bucket, not cumulative; the last is `+Inf`.
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Histogram {
    /// Records one observation.
    pub fn observe(&self, v: f64) {
        let i = self.bounds.partition_point(|b| *b < v);
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        s.counts[i] += 1;
        s.sum += v;
        s.count += 1;
    }
    /// How many observations.
    pub fn count(&self) -> u64 {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).count
    }
    /// Their sum.
    pub fn sum(&self) -> f64 {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).sum
    }
    /// Observations at most `bound` (a bucket's cumulative count).
    pub fn count_le(&self, bound: f64) -> u64 {
        let s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        self.bounds
            .iter()
            .zip(&s.counts)
            .take_while(|(b, _)| **b <= bound)
            .map(|(_, c)| c)
            .sum()
    }
}

impl Metric for Histogram {
    fn new(desc: &Desc) -> Self {
        Self {
            bounds: desc.buckets.clone().into(),
            state: Mutex::new(HistogramState {
                counts: vec![0; desc.buckets.len() + 1],
                ..Default::default()
            }),
        }
    }
    fn encode(&self, out: &mut String, desc: &Desc, labels: &str) {
        let s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let mut cumulative = 0;
        let bounds = self.bounds.iter().map(|b| go_float(*b));
        for (bound, count) in bounds.chain(["+Inf".to_string()]).zip(&s.counts) {
            cumulative += count;
            let labels = join(labels, &format!("le=\"{bound}\""));
            sample(out, &desc.name, "_bucket", &labels, cumulative as f64);
        }
        sample(out, &desc.name, "_sum", labels, s.sum);
        sample(out, &desc.name, "_count", labels, s.count as f64);
    }
}

/// How long a summary's quantiles look back: client_golang's default `MaxAge`.
const SUMMARY_MAX_AGE: Duration = Duration::from_secs(600);
/// The most observations a summary keeps for its quantiles, newest kept.
const SUMMARY_MAX_SAMPLES: usize = 4096;

/// A summary: quantiles of the last ten minutes' observations, sum and count of all.
#[derive(Debug)]
pub struct Summary {
    quantiles: Arc<[f64]>,
    state: Mutex<SummaryState>,
}

#[derive(Debug, Default)]
struct SummaryState {
    window: VecDeque<(Instant, f64)>,
    sum: f64,
    count: u64,
}

impl SummaryState {
    fn expire(&mut self, now: Instant) {
        while self
            .window
            .front()
            .is_some_and(|(at, _)| now.duration_since(*at) > SUMMARY_MAX_AGE)
        {
            self.window.pop_front();
        }
    }
}

impl Summary {
    /// Records one observation.
    pub fn observe(&self, v: f64) {
        let now = Instant::now();
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        s.expire(now);
        if s.window.len() == SUMMARY_MAX_SAMPLES {
            s.window.pop_front();
        }
        s.window.push_back((now, v));
        s.sum += v;
        s.count += 1;
    }
    /// How many observations.
    pub fn count(&self) -> u64 {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).count
    }
    /// Their sum.
    pub fn sum(&self) -> f64 {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).sum
    }
    /// The `q` quantile of the window (NaN when it is empty): the smallest observation with
    /// at least `q` of them at or below it.
    pub fn quantile(&self, q: f64) -> f64 {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        s.expire(Instant::now());
        let mut values: Vec<f64> = s.window.iter().map(|(_, v)| *v).collect();
        drop(s);
        quantile_of(&mut values, q)
    }
}

fn quantile_of(values: &mut [f64], q: f64) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_by(f64::total_cmp);
    let rank = (q * values.len() as f64).ceil() as usize;
    values[rank.clamp(1, values.len()) - 1]
}

impl Metric for Summary {
    fn new(desc: &Desc) -> Self {
        Self {
            quantiles: desc.quantiles.clone().into(),
            state: Mutex::default(),
        }
    }
    fn encode(&self, out: &mut String, desc: &Desc, labels: &str) {
        for q in self.quantiles.iter() {
            let labels = join(labels, &format!("quantile=\"{}\"", go_float(*q)));
            sample(out, &desc.name, "", &labels, self.quantile(*q));
        }
        let s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        sample(out, &desc.name, "_sum", labels, s.sum);
        sample(out, &desc.name, "_count", labels, s.count as f64);
    }
}

/// One metric per label set, all with the family's label names.
pub struct Family<M> {
    inner: Arc<FamilyInner<M>>,
}

impl<M> Clone for Family<M> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

struct FamilyInner<M> {
    desc: Desc,
    series: RwLock<BTreeMap<Vec<String>, Arc<M>>>,
}

impl<M: Metric> Family<M> {
    /// A family described by `desc`.
    pub fn new(desc: Desc) -> Self {
        Self {
            inner: Arc::new(FamilyInner {
                desc,
                series: RwLock::default(),
            }),
        }
    }

    /// What it is.
    pub fn desc(&self) -> &Desc {
        &self.inner.desc
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<Vec<String>, Arc<M>>> {
        self.inner.series.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<Vec<String>, Arc<M>>> {
        self.inner.series.write().unwrap_or_else(|e| e.into_inner())
    }

    /// The series with these label values, in the order of [`Desc::labels`], made if new.
    pub fn with(&self, values: &[&str]) -> Arc<M> {
        debug_assert_eq!(
            values.len(),
            self.desc().labels.len(),
            "{}: label values {values:?} for {:?}",
            self.desc().name,
            self.desc().labels
        );
        let key: Vec<String> = values.iter().map(|v| v.to_string()).collect();
        if let Some(m) = self.read().get(&key) {
            return m.clone();
        }
        self.write()
            .entry(key)
            .or_insert_with(|| Arc::new(M::new(&self.inner.desc)))
            .clone()
    }

    /// The series with these labels, given by name in any order, made if new. A label the
    /// family does not have is a bug at the call site (debug builds panic); one it has and
    /// the pairs lack is empty, as Go's client would refuse and we would rather not.
    pub fn get_or_create(&self, labels: &Labels) -> Arc<M> {
        debug_assert!(
            labels.iter().all(|(k, _)| self.desc().labels.contains(k))
                && labels.len() == self.desc().labels.len(),
            "{}: labels {labels:?} for {:?}",
            self.desc().name,
            self.desc().labels
        );
        let values: Vec<&str> = self
            .desc()
            .labels
            .iter()
            .map(|name| {
                labels
                    .iter()
                    .find(|(k, _)| k == name)
                    .map_or("", |(_, v)| v.as_str())
            })
            .collect();
        self.with(&values)
    }

    /// The series with these label values, if it exists.
    pub fn get(&self, values: &[&str]) -> Option<Arc<M>> {
        let key: Vec<String> = values.iter().map(|v| v.to_string()).collect();
        self.read().get(&key).cloned()
    }

    /// Removes the series with these label values; whether it existed.
    pub fn remove(&self, values: &[&str]) -> bool {
        let key: Vec<String> = values.iter().map(|v| v.to_string()).collect();
        self.write().remove(&key).is_some()
    }

    /// Removes every series whose labels include all of `pairs` (operatorpkg's
    /// `DeletePartialMatch`).
    pub fn remove_matching(&self, pairs: &[(&str, &str)]) {
        let positions: Vec<(usize, &str)> = pairs
            .iter()
            .filter_map(|(k, v)| Some((self.desc().labels.iter().position(|l| l == k)?, *v)))
            .collect();
        if positions.len() != pairs.len() {
            return;
        }
        self.write()
            .retain(|key, _| !positions.iter().all(|(i, v)| key[*i] == *v));
    }

    /// Keeps only the series whose label values `keep` accepts.
    pub fn retain(&self, mut keep: impl FnMut(&[String]) -> bool) {
        self.write().retain(|key, _| keep(key));
    }

    /// Every series' label values.
    pub fn label_sets(&self) -> Vec<Vec<String>> {
        self.read().keys().cloned().collect()
    }

    /// How many series.
    pub fn len(&self) -> usize {
        self.read().len()
    }

    /// Whether it has none.
    pub fn is_empty(&self) -> bool {
        self.read().is_empty()
    }
}

impl Family<Counter> {
    /// Adds one to the family's only series (a family without labels).
    pub fn inc(&self) {
        self.with(&[]).inc();
    }
}

impl Family<Histogram> {
    /// Observes into the family's only series (a family without labels).
    pub fn observe(&self, v: f64) {
        self.with(&[]).observe(v);
    }
}

impl Family<Gauge> {
    /// Sets the series with these label values.
    pub fn set(&self, values: &[&str], v: f64) {
        self.with(values).set(v);
    }

    /// The value of the series with these label values, if it exists.
    pub fn value(&self, values: &[&str]) -> Option<f64> {
        self.get(values).map(|g| g.get())
    }

    /// Makes the family exactly `series`: values set, series not among them removed
    /// (upstream's metric store `ReplaceAll`, for gauges recomputed from state).
    pub fn replace_all(&self, series: impl IntoIterator<Item = (Vec<String>, f64)>) {
        self.replace_matching(&[], series);
    }

    /// Makes the series whose labels include all of `pairs` exactly `series` (which should
    /// include them too); the others stay.
    pub fn replace_matching(
        &self,
        pairs: &[(&str, &str)],
        series: impl IntoIterator<Item = (Vec<String>, f64)>,
    ) {
        let positions: Vec<(usize, &str)> = pairs
            .iter()
            .filter_map(|(k, v)| Some((self.desc().labels.iter().position(|l| l == k)?, *v)))
            .collect();
        let mut map = self.write();
        let mut old: BTreeMap<Vec<String>, Arc<Gauge>> = BTreeMap::new();
        map.retain(|key, g| {
            let matches = positions.iter().all(|(i, v)| key[*i] == *v);
            if matches {
                old.insert(key.clone(), g.clone());
            }
            !matches
        });
        for (key, v) in series {
            debug_assert_eq!(key.len(), self.desc().labels.len(), "{}", self.desc().name);
            let gauge = old.remove(&key).unwrap_or_default();
            gauge.set(v);
            map.insert(key, gauge);
        }
    }
}

/// Anything the registry can encode.
trait Collect: Send + Sync {
    fn desc(&self) -> &Desc;
    fn encode(&self, out: &mut String);
}

impl<M: Metric> Collect for Family<M> {
    fn desc(&self) -> &Desc {
        Family::desc(self)
    }

    fn encode(&self, out: &mut String) {
        let desc = self.desc();
        let series = self.read();
        if series.is_empty() {
            return;
        }
        let _ = writeln!(out, "# HELP {} {}", desc.name, escape_help(&desc.help));
        let _ = writeln!(out, "# TYPE {} {}", desc.name, desc.kind.as_str());
        // Go's client sorts each series' labels by name and the series by those labels.
        let mut order: Vec<usize> = (0..desc.labels.len()).collect();
        order.sort_by_key(|i| &desc.labels[*i]);
        let mut lines: Vec<(String, &Arc<M>)> = series
            .iter()
            .map(|(values, m)| {
                let labels = order
                    .iter()
                    .map(|i| format!("{}=\"{}\"", desc.labels[*i], escape_value(&values[*i])))
                    .collect::<Vec<_>>()
                    .join(",");
                (labels, m)
            })
            .collect();
        lines.sort_by(|a, b| a.0.cmp(&b.0));
        for (labels, m) in lines {
            m.encode(out, desc, &labels);
        }
    }
}

/// The families of a process, encoded together.
#[derive(Default)]
pub struct Registry {
    families: Vec<Box<dyn Collect>>,
}

impl Registry {
    /// Adds a family (a clone: the caller keeps its handle).
    pub fn register<M: Metric>(&mut self, family: &Family<M>) {
        debug_assert!(
            self.families
                .iter()
                .all(|f| f.desc().name != family.desc().name),
            "{} registered twice",
            family.desc().name
        );
        self.families.push(Box::new(family.clone()));
    }

    /// Every family's descriptor, by name.
    pub fn descriptors(&self) -> Vec<Desc> {
        let mut all: Vec<Desc> = self.families.iter().map(|f| f.desc().clone()).collect();
        all.sort_by(|a, b| a.name.cmp(&b.name));
        all
    }

    /// The text exposition (format 0.0.4), families by name, as Go's client serves it.
    pub fn encode(&self) -> String {
        let mut families: Vec<&dyn Collect> = self.families.iter().map(|f| &**f).collect();
        families.sort_by(|a, b| a.desc().name.cmp(&b.desc().name));
        let mut out = String::new();
        for f in families {
            f.encode(&mut out);
        }
        out
    }
}

fn join(labels: &str, extra: &str) -> String {
    if labels.is_empty() {
        extra.to_string()
    } else {
        format!("{labels},{extra}")
    }
}

fn sample(out: &mut String, name: &str, suffix: &str, labels: &str, v: f64) {
    if labels.is_empty() {
        let _ = writeln!(out, "{name}{suffix} {}", go_float(v));
    } else {
        let _ = writeln!(out, "{name}{suffix}{{{labels}}} {}", go_float(v));
    }
}

fn escape_help(s: &str) -> String {
    s.replace('\\', "\\\\").replace('\n', "\\n")
}

fn escape_value(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// A float as Go's `strconv.FormatFloat(v, 'g', -1, 64)` writes it, which is what its client
/// puts in the exposition, `le` and `quantile` labels included: the shortest form that reads
/// back, in exponent form when the exponent is below -4 or at least 6 (`1e+06`, `123456`).
pub fn go_float(v: f64) -> String {
    if v.is_nan() {
        return "NaN".into();
    }
    if v.is_infinite() {
        return if v > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        };
    }
    if v == 0.0 {
        return if v.is_sign_negative() { "-0" } else { "0" }.into();
    }
    // Rust's `{:e}` is the shortest round-trip form too: `d.ddde±x`.
    let sci = format!("{v:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if !(-4..6).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.abs())
    } else {
        format!("{v}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn desc(name: &str, kind: Kind, labels: &[&str]) -> Desc {
        Desc {
            name: name.into(),
            help: "Help.".into(),
            kind,
            labels: labels.iter().map(|s| s.to_string()).collect(),
            buckets: vec![0.5, 1.0],
            quantiles: vec![0.0, 0.5, 1.0],
        }
    }

    #[test]
    fn floats_as_go_writes_them() {
        for (v, go) in [
            (1.0, "1"),
            (0.005, "0.005"),
            (0.1, "0.1"),
            (1024.0, "1024"),
            (86400.0, "86400"),
            (123456.0, "123456"),
            (1_000_000.0, "1e+06"),
            (2_592_000.0, "2.592e+06"),
            (1_234_567.0, "1.234567e+06"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1e-8, "1e-08"),
            (-2.5, "-2.5"),
            (0.0, "0"),
            (f64::INFINITY, "+Inf"),
            (f64::NAN, "NaN"),
        ] {
            assert_eq!(go_float(v), go, "{v}");
        }
    }

    #[test]
    fn text_exposition_as_go_writes_it() {
        let counter = Family::<Counter>::new(desc("a_total", Kind::Counter, &["z", "b"]));
        let histogram = Family::<Histogram>::new(desc("b_seconds", Kind::Histogram, &[]));
        let summary = Family::<Summary>::new(desc("c_seconds", Kind::Summary, &["x"]));
        let empty = Family::<Gauge>::new(desc("d", Kind::Gauge, &["x"]));
        let mut registry = Registry::default();
        registry.register(&summary);
        registry.register(&counter);
        registry.register(&histogram);
        registry.register(&empty);
        counter.with(&["1", "q\"\n"]).inc();
        counter
            .get_or_create(&vec![("b".into(), "a".into()), ("z".into(), "0".into())])
            .inc_by(2);
        histogram.observe(0.5);
        histogram.observe(3.0);
        summary.with(&["p"]).observe(2.0);
        summary.with(&["p"]).observe(4.0);
        assert_eq!(
            registry.encode(),
            "# HELP a_total Help.\n# TYPE a_total counter\n\
             a_total{b=\"a\",z=\"0\"} 2\n\
             a_total{b=\"q\\\"\\n\",z=\"1\"} 1\n\
             # HELP b_seconds Help.\n# TYPE b_seconds histogram\n\
             b_seconds_bucket{le=\"0.5\"} 1\n\
             b_seconds_bucket{le=\"1\"} 1\n\
             b_seconds_bucket{le=\"+Inf\"} 2\n\
             b_seconds_sum 3.5\n\
             b_seconds_count 2\n\
             # HELP c_seconds Help.\n# TYPE c_seconds summary\n\
             c_seconds{x=\"p\",quantile=\"0\"} 2\n\
             c_seconds{x=\"p\",quantile=\"0.5\"} 2\n\
             c_seconds{x=\"p\",quantile=\"1\"} 4\n\
             c_seconds_sum{x=\"p\"} 6\n\
             c_seconds_count{x=\"p\"} 2\n"
        );
    }

    #[test]
    fn quantiles_of_a_window() {
        for (values, q, want) in [
            (vec![], 0.5, f64::NAN),
            (vec![3.0, 1.0, 2.0], 0.0, 1.0),
            (vec![3.0, 1.0, 2.0], 0.5, 2.0),
            (vec![3.0, 1.0, 2.0], 0.9, 3.0),
            (vec![3.0, 1.0, 2.0], 1.0, 3.0),
            ((1..=100).map(f64::from).collect(), 0.99, 99.0),
        ] {
            let mut values = values;
            let got = quantile_of(&mut values, q);
            assert!(got == want || (got.is_nan() && want.is_nan()), "{q}: {got}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_summary_forgets_observations_older_than_ten_minutes() {
        let s = Summary::new(&desc("s", Kind::Summary, &[]));
        s.observe(100.0);
        tokio::time::advance(Duration::from_secs(300)).await;
        s.observe(1.0);
        assert_eq!(s.quantile(1.0), 100.0);
        tokio::time::advance(Duration::from_secs(301)).await;
        assert_eq!(s.quantile(1.0), 1.0);
        assert_eq!((s.count(), s.sum()), (2, 101.0), "sum and count keep all");
    }

    #[test]
    fn partial_match_removal_and_replace_all() {
        let g = Family::<Gauge>::new(desc("g", Kind::Gauge, &["name", "type"]));
        g.set(&["a", "Ready"], 1.0);
        g.set(&["a", "Launched"], 1.0);
        g.set(&["b", "Ready"], 1.0);
        g.remove_matching(&[("name", "a")]);
        assert_eq!(g.label_sets(), vec![vec!["b".to_string(), "Ready".into()]]);
        g.replace_all([(vec!["c".into(), "Ready".into()], 2.0)]);
        assert_eq!(g.value(&["c", "Ready"]), Some(2.0));
        assert_eq!(g.value(&["b", "Ready"]), None);
    }

    #[test]
    fn histogram_buckets_are_upper_bounds() {
        let h = Histogram::new(&desc("h", Kind::Histogram, &[]));
        for v in [0.1, 0.5, 0.7, 1.0, 9.0] {
            h.observe(v);
        }
        assert_eq!(h.count_le(0.5), 2);
        assert_eq!(h.count_le(1.0), 4);
        assert_eq!(h.count(), 5);
    }
}

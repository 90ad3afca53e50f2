//! `/metrics`: one `prometheus-client` registry holding every family, with
//! typed label sets.
//!
//! The frame path only touches atomics: counters are pre-created for every
//! label value at start (so `Family::get_or_create` and its lock never run
//! per frame), and the latency histograms are our own atomic buckets
//! (`AtomicHistogram`), encoded through `EncodeMetric` like any other metric.
//! Gauges that describe a state (source up, archive bytes) are set by their
//! owners or refreshed just before a scrape.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus_client::encoding::{EncodeLabelSet, EncodeMetric, MetricEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::{MetricType, TypedMetric};
use prometheus_client::registry::Registry;

use crate::decision::Reason;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct VerdictLabels {
    pub verdict: &'static str,
    pub reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StageLabels {
    pub stage: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DropLabels {
    pub reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FlipLabels {
    pub direction: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BuildLabels {
    pub version: String,
    pub backend: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ModelLabels {
    pub role: &'static str,
    pub file: String,
    /// First 12 hex digits of the file's SHA-256 (`crate::model_id`).
    pub sha256: String,
}

use crate::archive::ArchiveCounters;
pub use crate::archive::ArchiveDrop;
use crate::shadow::{Flip, ShadowCounters};
use crate::stats::ResultCounters;

/// Fixed-bucket histogram of seconds on atomics: `observe` is a few relaxed
/// adds, never a lock. A scrape reads the buckets one by one, so a frame
/// recorded meanwhile may show in `count` and not yet in its bucket; the next
/// scrape is exact again (counters only go up).
#[derive(Debug)]
pub struct AtomicHistogram {
    upper_bounds: Vec<f64>,
    /// One per bound, plus +Inf.
    buckets: Vec<AtomicU64>,
    count: AtomicU64,
    /// Sum in nanoseconds.
    sum_ns: AtomicU64,
}

impl AtomicHistogram {
    pub fn new(upper_bounds: Vec<f64>) -> Self {
        let buckets = (0..=upper_bounds.len())
            .map(|_| AtomicU64::new(0))
            .collect();
        AtomicHistogram {
            upper_bounds,
            buckets,
            count: AtomicU64::new(0),
            sum_ns: AtomicU64::new(0),
        }
    }

    pub fn observe(&self, value: Duration) {
        let seconds = value.as_secs_f64();
        let i = self
            .upper_bounds
            .iter()
            .position(|b| seconds <= *b)
            .unwrap_or(self.upper_bounds.len());
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
        self.sum_ns.fetch_add(
            value.as_nanos().min(u64::MAX as u128) as u64,
            Ordering::Relaxed,
        );
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    fn encode_into(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let mut buckets: Vec<(f64, u64)> = self
            .upper_bounds
            .iter()
            .zip(&self.buckets)
            .map(|(b, c)| (*b, c.load(Ordering::Relaxed)))
            .collect();
        buckets.push((
            f64::INFINITY,
            self.buckets[self.upper_bounds.len()].load(Ordering::Relaxed),
        ));
        let count = buckets.iter().map(|(_, c)| c).sum();
        let sum = self.sum_ns.load(Ordering::Relaxed) as f64 * 1e-9;
        encoder
            .encode_histogram::<prometheus_client::encoding::NoLabelSet>(sum, count, &buckets, None)
    }
}

impl TypedMetric for AtomicHistogram {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for AtomicHistogram {
    fn encode(&self, encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        self.encode_into(encoder)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

/// Per-stage histograms with a fixed set of stages (no map, no lock).
#[derive(Debug)]
pub struct StageHistograms {
    stages: Vec<(&'static str, AtomicHistogram)>,
}

impl StageHistograms {
    pub fn observe(&self, index: usize, value: Duration) {
        if let Some((_, h)) = self.stages.get(index) {
            h.observe(value);
        }
    }
}

impl TypedMetric for StageHistograms {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for StageHistograms {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        for (stage, h) in &self.stages {
            h.encode_into(encoder.encode_family(&StageLabels { stage })?)?;
        }
        Ok(())
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

/// Buckets of the capture-to-verdict histogram: dense around the deadline
/// (a quarter of it to twice it), coarser beyond.
pub fn deadline_buckets(deadline: Duration) -> Vec<f64> {
    let d = deadline.as_secs_f64();
    [
        0.25, 0.5, 0.75, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0, 3.0, 5.0, 10.0, 20.0,
    ]
    .iter()
    .map(|f| f * d)
    .collect()
}

/// Buckets of the per-stage histograms: 0.5 ms to about 4 s, doubling.
fn stage_buckets() -> Vec<f64> {
    (0..14).map(|i| 0.0005 * f64::from(1u32 << i)).collect()
}

/// The deadline the latency buckets centre on when none is configured: the
/// 60 ms offset of a typical reject gate.
pub const DEFAULT_DEADLINE: Duration = Duration::from_millis(60);

/// Every metric sealcheck exports, and the registry that encodes them.
#[derive(Debug)]
pub struct LineMetrics {
    registry: Mutex<Registry>,
    /// The output stage's result counters, registered here as `frames`,
    /// `verdicts` and `not_inspected` (the output stage counts).
    pub results: ResultCounters,
    pub verdict_latency: Arc<AtomicHistogram>,
    pub stage_latency: Arc<StageHistograms>,
    pub source_up: Gauge,
    /// The archive's own counters, registered here (the archive counts).
    pub archive: ArchiveCounters,
    /// The shadow's counters, registered here (the shadow counts); zero
    /// while no `[shadow]` runs.
    pub shadow: ShadowCounters,
    pub live_frames: Counter,
    /// `model_info`: the models judging now (a model swap replaces them).
    model_info: Family<ModelLabels, Gauge>,
}

/// Stages timed per frame, in `stage_latency` order.
pub const TIMED_STAGES: [&str; 3] = ["preprocess", "segment", "classify"];

impl LineMetrics {
    pub fn new(deadline: Duration) -> Arc<LineMetrics> {
        let mut registry = Registry::with_prefix("sealcheck");
        let frames = Counter::default();
        registry.register(
            "frames",
            "Frames that got a result line (every delivered frame gets exactly one)",
            frames.clone(),
        );
        let verdict_family = Family::<VerdictLabels, Counter>::default();
        let by_reason = Reason::ALL.map(|r| {
            verdict_family
                .get_or_create(&VerdictLabels {
                    verdict: r.verdict().as_str(),
                    reason: r.as_str(),
                })
                .clone()
        });
        registry.register("verdicts", "Verdicts by verdict and reason", verdict_family);
        let results = ResultCounters::new(frames, by_reason);
        // The same count as verdicts{reason="not_inspected"}, under its own
        // name for the alert rules.
        registry.register(
            "not_inspected",
            "Frames failed without inspection (dropped under overflow = \"drop\")",
            results.reason(Reason::NotInspected).clone(),
        );
        let verdict_latency = Arc::new(AtomicHistogram::new(deadline_buckets(deadline)));
        registry.register(
            "verdict_latency_seconds",
            "Time from capture to verdict; buckets centre on the per-part deadline",
            Shared(Arc::clone(&verdict_latency)),
        );
        let stage_latency = Arc::new(StageHistograms {
            stages: TIMED_STAGES
                .iter()
                .map(|s| (*s, AtomicHistogram::new(stage_buckets())))
                .collect(),
        });
        registry.register(
            "stage_latency_seconds",
            "Time each stage spent on a frame",
            Shared(Arc::clone(&stage_latency)),
        );
        let source_up = Gauge::default();
        let drop_family = Family::<DropLabels, Counter>::default();
        let archive = ArchiveCounters::new(ArchiveDrop::ALL.map(|d| {
            drop_family
                .get_or_create(&DropLabels { reason: d.as_str() })
                .clone()
        }));
        let live_frames = Counter::default();
        let flip_family = Family::<FlipLabels, Counter>::default();
        let shadow = ShadowCounters::new(Flip::ALL.map(|f| {
            flip_family
                .get_or_create(&FlipLabels {
                    direction: f.as_str(),
                })
                .clone()
        }));
        let metrics = LineMetrics {
            registry: Mutex::new(Registry::default()),
            results,
            verdict_latency,
            stage_latency,
            source_up: source_up.clone(),
            archive: archive.clone(),
            shadow: shadow.clone(),
            live_frames: live_frames.clone(),
            model_info: Family::default(),
        };
        registry.register(
            "source_up",
            "1 while the source is streaming frames, else 0",
            source_up,
        );
        registry.register(
            "archive_bytes",
            "Bytes in the archive folder (frames, masks, manifests)",
            archive.bytes.clone(),
        );
        registry.register(
            "archive_files",
            "Frames written to the archive",
            archive.files.clone(),
        );
        registry.register(
            "archive_dropped",
            "Frames the archive should have kept but did not, by reason",
            drop_family,
        );
        registry.register(
            "shadow_frames",
            "Frames the shadow models judged and compared with production ([shadow])",
            shadow.frames.clone(),
        );
        registry.register(
            "shadow_flips",
            "Frames the shadow would have judged the other way, by direction (pass_to_fail: production passed)",
            flip_family,
        );
        registry.register(
            "shadow_skipped",
            "Frames due to the shadow that it did not judge (busy: it runs in spare time only)",
            shadow.skipped.clone(),
        );
        registry.register(
            "shadow_failures",
            "Frames the shadow's engine failed on",
            shadow.failures.clone(),
        );
        registry.register(
            "shadow_mask_iou",
            "Mask IoU of the shadow's seal mask against production's, per compared frame",
            shadow.mask_iou,
        );
        registry.register(
            "live_frames",
            "Frames handed to the status page's live view",
            live_frames,
        );
        *metrics.registry.lock().unwrap_or_else(|p| p.into_inner()) = registry;
        Arc::new(metrics)
    }

    /// The registry, to register more families (build and model info, and
    /// the counters other parts own: see `status::external`).
    pub fn registry(&self) -> std::sync::MutexGuard<'_, Registry> {
        self.registry.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `build_info` and `model_info`, set once the backend is chosen.
    pub fn register_info(&self, backend: &str, models: &[(&'static str, String, String)]) {
        let mut registry = self.registry();
        // A gauge of 1 rather than OpenMetrics' `info` type, which the
        // Prometheus text format (and promtool) does not know.
        let build = Family::<BuildLabels, Gauge>::default();
        build
            .get_or_create(&BuildLabels {
                version: env!("CARGO_PKG_VERSION").to_string(),
                backend: backend.to_string(),
            })
            .set(1);
        registry.register(
            "build_info",
            "sealcheck version and the inference backend in use",
            build,
        );
        self.set_models(models);
        registry.register(
            "model_info",
            "Models loaded: role, file and the first 12 hex digits of its SHA-256",
            self.model_info.clone(),
        );
    }

    /// `model_info` names `models` only (after a model swap: the new ones).
    pub fn set_models(&self, models: &[(&'static str, String, String)]) {
        self.model_info.clear();
        for (role, file, sha256) in models {
            self.model_info
                .get_or_create(&ModelLabels {
                    role,
                    file: file.clone(),
                    sha256: sha256.clone(),
                })
                .set(1);
        }
    }

    /// OpenMetrics text, what Prometheus asks for first.
    pub fn encode_openmetrics(&self) -> String {
        let mut out = String::with_capacity(8 * 1024);
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry());
        out
    }

    /// The classic Prometheus text format (0.0.4), for clients that do not
    /// ask for OpenMetrics (`curl`, `promtool check metrics`).
    pub fn encode_prometheus(&self) -> String {
        openmetrics_to_prometheus(&self.encode_openmetrics())
    }
}

/// The verdict a reason implies.
/// A metric shared between its owner and the registry.
#[derive(Debug)]
struct Shared<T>(Arc<T>);

impl<T: EncodeMetric> TypedMetric for Shared<T> {
    const TYPE: MetricType = MetricType::Histogram;
}

impl<T: EncodeMetric> EncodeMetric for Shared<T> {
    fn encode(&self, encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        self.0.encode(encoder)
    }
    fn metric_type(&self) -> MetricType {
        self.0.metric_type()
    }
}

/// OpenMetrics text to the Prometheus text format: a counter family's
/// `HELP`/`TYPE` name gets the `_total` its samples carry, and the
/// OpenMetrics-only lines (`# UNIT`, `# EOF`) go.
pub fn openmetrics_to_prometheus(text: &str) -> String {
    let counters: std::collections::HashSet<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(text.len() + 256);
    for line in text.lines() {
        if line.starts_with("# EOF") || line.starts_with("# UNIT ") {
            continue;
        }
        let meta = ["# HELP ", "# TYPE "]
            .iter()
            .find_map(|p| line.strip_prefix(p).map(|rest| (*p, rest)));
        match meta {
            Some((prefix, rest)) => {
                let name = rest.split(' ').next().unwrap_or("");
                if counters.contains(name) {
                    out.push_str(prefix);
                    out.push_str(name);
                    out.push_str("_total");
                    out.push_str(&rest[name.len()..]);
                } else {
                    out.push_str(line);
                }
            }
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_info_names_the_swapped_in_models_only() {
        let m = LineMetrics::new(DEFAULT_DEADLINE);
        let models = |seg: &str, cls: &str| {
            vec![
                ("segmentation", "seg.onnx".to_string(), seg.to_string()),
                ("classifier", "cls.onnx".to_string(), cls.to_string()),
            ]
        };
        m.register_info("onnxruntime-cpu", &models("aaaaaaaaaaaa", "bbbbbbbbbbbb"));
        m.set_models(&models("cccccccccccc", "dddddddddddd"));
        let text = m.encode_prometheus();
        let lines: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("sealcheck_model_info"))
            .collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(
            lines.iter().any(|l| l.contains("sha256=\"cccccccccccc\"")),
            "{text}"
        );
        assert!(
            !text.contains("aaaaaaaaaaaa") && !text.contains("bbbbbbbbbbbb"),
            "the start-up models are still named after the swap:\n{text}"
        );
    }

    #[test]
    fn counters_and_histograms_encode_with_every_label_value_from_the_start() {
        let m = LineMetrics::new(DEFAULT_DEADLINE);
        m.results.record(Reason::Defect);
        m.verdict_latency.observe(Duration::from_millis(59));
        m.verdict_latency.observe(Duration::from_millis(61));
        m.verdict_latency.observe(Duration::from_secs(5));
        let text = m.encode_prometheus();
        assert!(
            text.contains("# TYPE sealcheck_frames_total counter"),
            "{text}"
        );
        assert!(text.contains("sealcheck_frames_total 1"), "{text}");
        assert!(
            text.contains("sealcheck_verdicts_total{verdict=\"fail\",reason=\"defect\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("sealcheck_verdicts_total{verdict=\"pass\",reason=\"ok\"} 0"),
            "{text}"
        );
        assert!(
            text.contains("sealcheck_verdict_latency_seconds_bucket{le=\"0.06\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("sealcheck_verdict_latency_seconds_bucket{le=\"0.066\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("sealcheck_verdict_latency_seconds_bucket{le=\"+Inf\"} 3"),
            "{text}"
        );
        assert!(
            text.contains("sealcheck_verdict_latency_seconds_count 3"),
            "{text}"
        );
        assert!(!text.contains("# EOF"));
        assert!(m.encode_openmetrics().ends_with("# EOF\n"));
    }
}

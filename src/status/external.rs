//! Counters owned by other parts of sealcheck, shown in `/metrics`, in
//! `/api/status` and on the page. Each part keeps its own atomics; they are
//! read here at scrape time (a prometheus-client `Collector`), so the page
//! and the metrics never hold anything the part waits on.
//!
//! This is the one place where another part plugs in:
//! - the line (`crate::line`): verdicts sent to the line, `late` fails;
//! - MQTT (`crate::line::mqtt`): connected, published, dropped by reason, outages;
//! - source recovery (`crate::capture::SourceStatus`): up or lost, outages;
//! - GenICam cameras (`crate::capture::GenicamCounters`): incomplete frames,
//!   every camera's summed (per camera: `cameras::CameraCollector`);
//! - the results file (`crate::output::ResultsFileStatus`): write-error
//!   episodes and lost lines;
//! - triggers (`crate::trigger::TriggerDesk`, `plc` mode): accepted,
//!   refused, frames no trigger claimed (every camera's, summed);
//! - the Modbus server (`crate::plc::ModbusCounters`): connections by how
//!   they began and ended (a PLC never locked out: `evicted_idle`), requests.
//!
//! A new part adds a field here, its lines in `encode`, and its JSON.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use serde_json::{Value, json};

use super::metrics::DropLabels;
use crate::capture::{GenicamCounters, SourceStatus};
use crate::line::LineStats;
use crate::line::mqtt::{DropReason, MqttStats};
use crate::output::ResultsFileStatus;
use crate::plc::ModbusCounters;
use crate::trigger::TriggerDesk;

/// The other parts' stats, as far as this run has them.
#[derive(Clone, Default)]
pub struct ExternalStats {
    pub line: Option<Arc<LineStats>>,
    pub mqtt: Option<Arc<MqttStats>>,
    /// A live source's state (`None` for a replay); the first camera's
    /// with several (each is in `cameras`).
    pub source: Option<SourceStatus>,
    /// Every camera's source, by `FrameMeta::camera`.
    pub cameras: Vec<CameraSource>,
    pub results_file: Option<ResultsFileStatus>,
    /// `[trigger] mode = "plc"`: every camera's trigger desk; empty otherwise.
    pub triggers: Vec<Arc<TriggerDesk>>,
    /// `[modbus]`: the server's connection counters.
    pub modbus: Option<Arc<ModbusCounters>>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: &'static str,
}

/// One camera's source, as the status side shows it.
#[derive(Clone)]
pub struct CameraSource {
    /// `[cameras.NAME]`'s name; `None` for `[source]`.
    pub name: Option<String>,
    /// The source kind (`v4l2`, `rtsp`, `file`, ...).
    pub kind: &'static str,
    /// Up or lost, outages (`None` for a replay).
    pub status: Option<SourceStatus>,
    /// A GenICam camera's whole and incomplete frames (`None` for other kinds).
    pub genicam: Option<GenicamCounters>,
}

impl ExternalStats {
    /// Parts whose `late` fails reached the line.
    pub fn late(&self) -> Option<u64> {
        self.line.as_ref().map(|l| l.late.load(Ordering::Relaxed))
    }

    /// `/api/status`'s source details (besides `kind` and `up`).
    pub fn source_json(&self) -> Value {
        match &self.source {
            None => Value::Null,
            Some(s) => json!({
                "outages": s.outages(),
                "frozen": s.frozen(),
                "abandoned_pipelines": s.abandoned(),
                "abandoned_still_stuck": s.abandoned_still_stuck(),
                "lost_since": s.lost_since().map(|t| {
                    let mut out = String::new();
                    crate::timestamp::write_rfc3339(&mut out, t);
                    out
                }),
            }),
        }
    }

    /// `/api/status`'s `results_file` object.
    pub fn results_file_json(&self) -> Value {
        match &self.results_file {
            None => Value::Null,
            Some(r) => json!({
                "writable": r.is_writable(),
                "lost_lines": r.lost_lines(),
                "write_error_episodes": r.episodes(),
            }),
        }
    }

    /// `/api/status`'s `triggers` object; `null` in `free` mode.
    pub fn triggers_json(&self) -> Value {
        if self.triggers.is_empty() {
            return Value::Null;
        }
        let (accepted, refused, passed_over) = self.trigger_counts();
        json!({
            "online": self.triggers.iter().all(|d| d.online()),
            "accepted": accepted,
            "refused": refused,
            "frames_passed_over": passed_over,
        })
    }

    /// Triggers accepted and refused, and frames no trigger claimed, summed.
    pub(super) fn trigger_counts(&self) -> (u64, u64, u64) {
        self.triggers.iter().fold((0, 0, 0), |(a, r, p), d| {
            (a + d.accepted(), r + d.refused(), p + d.passed_over())
        })
    }

    /// `/api/status`'s `mqtt` object; `null` when MQTT is off.
    pub fn mqtt_json(&self) -> Value {
        match &self.mqtt {
            None => Value::Null,
            Some(m) => json!({
                "broker": m.broker,
                "connected": m.connected.load(Ordering::Relaxed),
                "published": m.published.load(Ordering::Relaxed),
                "dropped": m.dropped_total(),
                "late": m.late.load(Ordering::Relaxed),
                "outages": m.outages.load(Ordering::Relaxed),
            }),
        }
    }
}

/// Encodes `ExternalStats` at scrape time, as `read` gives them (the latest
/// the pipeline reported).
#[derive(Clone)]
pub struct ExternalCollector(pub Arc<dyn Fn() -> ExternalStats + Send + Sync>);

impl std::fmt::Debug for ExternalCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ExternalCollector")
    }
}

fn counter(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: u64,
) -> Result<(), std::fmt::Error> {
    ConstCounter::new(value).encode(encoder.encode_descriptor(
        name,
        help,
        None,
        MetricType::Counter,
    )?)
}

/// The Modbus server's connections and requests.
fn encode_modbus(
    encoder: &mut DescriptorEncoder,
    m: &ModbusCounters,
) -> Result<(), std::fmt::Error> {
    let load = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
    {
        let mut family = encoder.encode_descriptor(
            "modbus_connections",
            "Modbus TCP connections by outcome: accepted; refused_not_allowed (not on allow); \
             evicted_idle (closed to admit a new one when max_connections were open: the one \
             silent longest); closed_idle (idle_timeout_s without a request); closed_framing (a \
             header that cannot be framed)",
            None,
            MetricType::Counter,
        )?;
        for (outcome, value) in [
            ("accepted", load(&m.accepted)),
            ("refused_not_allowed", load(&m.refused_not_allowed)),
            ("evicted_idle", load(&m.evicted_idle)),
            ("closed_idle", load(&m.closed_idle)),
            ("closed_framing", load(&m.closed_framing)),
        ] {
            ConstCounter::new(value).encode(family.encode_family(&OutcomeLabels { outcome })?)?;
        }
    }
    counter(
        encoder,
        "modbus_requests",
        "Modbus requests answered (a response or an exception)",
        load(&m.requests),
    )?;
    ConstGauge::new(i64::try_from(m.open.load(Ordering::Relaxed)).unwrap_or(i64::MAX)).encode(
        encoder.encode_descriptor(
            "modbus_connections_open",
            "Modbus TCP connections open now",
            None,
            MetricType::Gauge,
        )?,
    )?;
    Ok(())
}

impl Collector for ExternalCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let stats = (self.0)();
        if let Some(modbus) = &stats.modbus {
            encode_modbus(&mut encoder, modbus)?;
        }
        if let Some(source) = &stats.source {
            counter(
                &mut encoder,
                "source_outages",
                "Times the live source was lost (or missing at start) and rebuilt",
                source.outages(),
            )?;
            counter(
                &mut encoder,
                "source_frozen",
                "Source losses found because no frame came for frame_timeout_ms",
                source.frozen(),
            )?;
            counter(
                &mut encoder,
                "source_pipelines_abandoned",
                "Source pipelines that did not stop within 2 s when lost or stopped (an element blocked \
                 in a read or a driver call) and were left behind",
                source.abandoned(),
            )?;
            ConstGauge::new(i64::try_from(source.abandoned_still_stuck()).unwrap_or(i64::MAX))
                .encode(encoder.encode_descriptor(
                    "source_pipelines_stuck",
                    "Abandoned source pipelines whose thread is still blocked now",
                    None,
                    MetricType::Gauge,
                )?)?;
        }
        let genicam: Vec<&GenicamCounters> = stats
            .cameras
            .iter()
            .filter_map(|c| c.genicam.as_ref())
            .collect();
        if !genicam.is_empty() {
            counter(
                &mut encoder,
                "source_incomplete_frames",
                "Frames GenICam cameras sent that did not arrive whole (lost packets): dropped, \
                 never judged; every camera's summed",
                genicam.iter().map(|g| g.incomplete()).sum(),
            )?;
        }
        if let Some(results) = &stats.results_file {
            counter(
                &mut encoder,
                "results_write_errors",
                "Episodes of results-file write errors (disk full, file removed, I/O error)",
                results.episodes(),
            )?;
            counter(
                &mut encoder,
                "results_lost_lines",
                "Result lines that never reached the results file",
                results.lost_lines(),
            )?;
        }
        if let Some(line) = &stats.line {
            counter(
                &mut encoder,
                "line_verdicts",
                "Verdicts handed to the line outputs (one per part)",
                line.sent.load(Ordering::Relaxed),
            )?;
            counter(
                &mut encoder,
                "late",
                "Parts failed `late`: no verdict by their deadline ([decision] deadline_ms)",
                line.late.load(Ordering::Relaxed),
            )?;
        }
        if !stats.triggers.is_empty() {
            let (accepted, refused, passed_over) = stats.trigger_counts();
            counter(
                &mut encoder,
                "triggers_accepted",
                "Triggers accepted ([trigger] mode = \"plc\"): each gets exactly one result",
                accepted,
            )?;
            counter(
                &mut encoder,
                "triggers_refused",
                "Triggers refused (station offline or too many waiting for frames): nothing is owed for them",
                refused,
            )?;
            counter(
                &mut encoder,
                "frames_passed_over",
                "Frames no trigger claimed, not judged",
                passed_over,
            )?;
        }
        if let Some(m) = &stats.mqtt {
            ConstGauge::new(i64::from(m.connected.load(Ordering::Relaxed))).encode(
                encoder.encode_descriptor(
                    "mqtt_connected",
                    "1 while connected to the MQTT broker",
                    None,
                    MetricType::Gauge,
                )?,
            )?;
            counter(
                &mut encoder,
                "mqtt_published",
                "Verdicts the broker acknowledged (QoS 1) or that were written (QoS 0)",
                m.published.load(Ordering::Relaxed),
            )?;
            counter(
                &mut encoder,
                "mqtt_outages",
                "Times the broker connection was lost or could not be made",
                m.outages.load(Ordering::Relaxed),
            )?;
            let mut family = encoder.encode_descriptor(
                "mqtt_dropped",
                "Verdicts that did not reach the broker, by reason",
                None,
                MetricType::Counter,
            )?;
            for (reason, n) in DropReason::ALL.iter().zip(&m.dropped) {
                ConstCounter::new(n.load(Ordering::Relaxed)).encode(family.encode_family(
                    &DropLabels {
                        reason: reason.as_str(),
                    },
                )?)?;
            }
        }
        Ok(())
    }
}

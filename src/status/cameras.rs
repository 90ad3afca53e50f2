//! Each camera as operators see it: its shift tally and the last hour's
//! trend (kept by the output thread in the board), joined on the HTTP side
//! with what capture says of its source (up, lost since, outages) and the
//! names the run reported.
//!
//! ```text
//! output thread: StatusBoard::record ─▶ BoardState.cameras[meta.camera] (CameraTally: counts, last, 60 minute buckets)
//! HTTP thread:   BoardState + RunFacts (info.cameras, external.cameras) ─▶ cameras(): one CameraView per camera
//!                  ─▶ /api/status "cameras", /healthz (lost cameras named), /metrics (CameraCollector)
//! ```
//!
//! Cameras are known by index (`FrameMeta::camera`) on the frame path and
//! by name only here: the output thread never looks a name up, and a frame
//! that arrives before the run reported its names is still counted.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use serde_json::{Value, json};

use super::board::BoardState;
use super::camera_tally::{CameraTally, unix_minute};
use super::cavity_tally::CavityTally;
use super::figures::{by_reason, yield_pct};

const REASONS: usize = Reason::ALL.len();
use super::run_report::{RunFacts, RunState};
use crate::capture::SourceStatus;
use crate::decision::Reason;

/// What a camera is doing, for the page and `/api/status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CameraState {
    /// The run is starting, or the camera has not delivered its first frame.
    Starting,
    /// Results came within the stall timeout.
    Inspecting,
    /// Its live source is lost (or missing since the start) and being rebuilt.
    Lost,
    /// Up, but no result for the stall timeout: a triggered camera between
    /// parts, or a recording that has ended while others go on.
    Idle,
    /// The run is stopping or has stopped.
    Ended,
}

impl CameraState {
    pub fn as_str(self) -> &'static str {
        match self {
            CameraState::Starting => "starting",
            CameraState::Inspecting => "inspecting",
            CameraState::Lost => "lost",
            CameraState::Idle => "idle",
            CameraState::Ended => "ended",
        }
    }
}

/// One camera: its name and source as the run reported them, its tally as
/// the board last published it.
pub struct CameraView<'a> {
    pub name: Option<&'a str>,
    pub kind: Option<&'a str>,
    /// A live source's state; `None` for a replay (or before the run said).
    pub status: Option<&'a SourceStatus>,
    pub tally: Option<&'a CameraTally>,
    /// Its cavities, with a cavity layout.
    pub cavities: Option<&'a CavityTally>,
    pub up: bool,
    pub state: CameraState,
}

impl CameraView<'_> {
    /// What is wrong with the camera, in the words of systemd's STATUS line
    /// with the camera named ("camera side lost since 12:03:04 UTC (40 s, 7
    /// tries), next try in 1.5 s"); `None` while it is fine.
    pub fn problem(&self) -> Option<String> {
        let outage = self.status?.describe_outage()?;
        Some(match self.name {
            Some(name) => named_outage(name, &outage),
            None => outage,
        })
    }
}

/// `outage` ("camera lost since ...", "waiting for camera since ...") with
/// the camera's name put in.
fn named_outage(name: &str, outage: &str) -> String {
    if let Some(rest) = outage.strip_prefix("camera ") {
        format!("camera {name} {rest}")
    } else if let Some(rest) = outage.strip_prefix("waiting for camera") {
        format!("waiting for camera {name}{rest}")
    } else {
        format!("camera {name}: {outage}")
    }
}

/// Every camera of the run, by index: as many as the run reported (or the
/// board has seen), at least one.
pub fn cameras<'a>(
    facts: &'a RunFacts,
    board: &'a BoardState,
    idle_after: Duration,
    now: Instant,
) -> Vec<CameraView<'a>> {
    let sources = &facts.external.cameras;
    let names = facts.info.as_ref().map(|i| i.cameras.as_slice());
    let count = sources
        .len()
        .max(names.map_or(0, <[_]>::len))
        .max(board.cameras.len())
        .max(1);
    (0..count)
        .map(|i| {
            let source = sources.get(i);
            let name = source
                .and_then(|s| s.name.as_deref())
                .or_else(|| names.and_then(|n| n.get(i)).and_then(Option::as_deref));
            let kind = source.map(|s| s.kind).or_else(|| {
                // Before the run reported its sources: `[source]`'s kind.
                (i == 0)
                    .then(|| facts.info.as_ref().map(|info| info.source.as_str()))
                    .flatten()
            });
            let status = source.and_then(|s| s.status.as_ref());
            let tally = board.cameras.get(i);
            let cavities = board.cavities.get(i).and_then(Option::as_deref);
            let up = facts.camera_up(i);
            let state = match facts.state {
                RunState::Starting => CameraState::Starting,
                RunState::Stopping | RunState::Stopped => CameraState::Ended,
                RunState::Running => match (
                    status.is_some_and(|s| !s.is_up()),
                    tally.and_then(|t| t.last_at),
                ) {
                    (true, _) => CameraState::Lost,
                    (false, None) => CameraState::Starting,
                    (false, Some(at)) if now.saturating_duration_since(at) <= idle_after => {
                        CameraState::Inspecting
                    }
                    (false, Some(_)) => CameraState::Idle,
                },
            };
            CameraView {
                name,
                kind,
                status,
                tally,
                cavities,
                up,
                state,
            }
        })
        .collect()
}

/// Whether the run's cameras are named (`[cameras.NAME]`): the page shows
/// tiles, `/metrics` a series per camera. `[source]` stays as it was.
pub fn named(facts: &RunFacts) -> bool {
    facts.external.cameras.iter().any(|c| c.name.is_some())
        || facts
            .info
            .as_ref()
            .is_some_and(|i| i.cameras.iter().any(Option::is_some))
}

/// The index of the camera called `name`, if the run has one.
pub fn index_of(facts: &RunFacts, name: &str) -> Option<usize> {
    let by_source = facts
        .external
        .cameras
        .iter()
        .position(|c| c.name.as_deref() == Some(name));
    by_source.or_else(|| {
        facts
            .info
            .as_ref()?
            .cameras
            .iter()
            .position(|c| c.as_deref() == Some(name))
    })
}

/// The named cameras' names, for a problem message ("top, side").
pub fn names_list(facts: &RunFacts) -> String {
    let from_sources: Vec<&str> = facts
        .external
        .cameras
        .iter()
        .filter_map(|c| c.name.as_deref())
        .collect();
    let names = if from_sources.is_empty() {
        facts
            .info
            .as_ref()
            .map(|i| i.cameras.iter().filter_map(Option::as_deref).collect())
            .unwrap_or_default()
    } else {
        from_sources
    };
    names.join(", ")
}

/// `/healthz`'s words for named cameras whose source is lost: "; camera
/// side lost since ..." each (empty when none is, and always for `[source]`,
/// whose loss `/healthz` already tells in its own words).
pub fn lost_cameras_note(facts: &RunFacts) -> String {
    let mut note = String::new();
    for camera in &facts.external.cameras {
        if let (Some(name), Some(outage)) = (
            camera.name.as_deref(),
            camera
                .status
                .as_ref()
                .and_then(SourceStatus::describe_outage),
        ) {
            note.push_str("; ");
            note.push_str(&named_outage(name, &outage));
        }
    }
    note
}

fn rfc3339(t: SystemTime) -> String {
    let mut s = String::with_capacity(24);
    crate::timestamp::write_rfc3339(&mut s, t);
    s
}

/// `/api/status`'s `cameras`: one object per camera, in the config's order
/// (each camera's `cavities` are added by `cavities::add_cavities`).
pub fn cameras_json(views: &[CameraView<'_>], now: SystemTime) -> Value {
    let now_minute = unix_minute(now);
    let empty = CameraTally::default();
    views
        .iter()
        .map(|c| {
            let t = c.tally.unwrap_or(&empty);
            let frames = t.passed + t.failed;
            json!({
                "name": c.name,
                "kind": c.kind,
                "state": c.state.as_str(),
                "up": c.up,
                "lost_since": c.status.and_then(SourceStatus::lost_since).map(rfc3339),
                "outages": c.status.map(SourceStatus::outages),
                "problem": c.problem(),
                "frames": frames,
                "pass": t.passed,
                "fail": t.failed,
                "yield_pct": yield_pct(t.passed, frames),
                "by_reason": by_reason(&t.by_reason),
                "last": t.last.map(|l| json!({
                    "seq": l.seq,
                    "part_id": l.part_id,
                    "ts": rfc3339(l.captured_at),
                    "verdict": l.verdict.as_str(),
                    "reason": l.reason.as_str(),
                    "latency_ms": l.latency_ms,
                })),
                "trend": t.trend(now_minute).map(|b| json!({
                    "minute": rfc3339(UNIX_EPOCH + Duration::from_secs(b.minute * 60)),
                    "pass": b.passed,
                    "fail": b.failed,
                })).collect::<Vec<_>>(),
            })
        })
        .collect::<Vec<_>>()
        .into()
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CameraLabels {
    camera: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CameraVerdictLabels {
    camera: String,
    verdict: &'static str,
    reason: &'static str,
}

/// The per-camera series of `/metrics`, read at scrape time from the
/// board's latest snapshot and the run's facts (`read`). Only with named
/// cameras: a `[source]` run's metrics stay as they were (its one camera
/// is the unlabelled series).
#[derive(Clone)]
pub struct CameraCollector(
    pub std::sync::Arc<dyn Fn() -> (RunFacts, BoardState, Duration) + Send + Sync>,
);

impl std::fmt::Debug for CameraCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CameraCollector")
    }
}

impl Collector for CameraCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let (facts, board, idle_after) = (self.0)();
        if !named(&facts) {
            return Ok(());
        }
        let views = cameras(&facts, &board, idle_after, Instant::now());
        let named: Vec<(&str, &CameraView<'_>)> = views
            .iter()
            .filter_map(|v| v.name.map(|n| (n, v)))
            .collect();
        {
            let mut family = encoder.encode_descriptor(
                "camera_results",
                "Result lines per camera, by verdict and reason (summed over cameras: verdicts_total)",
                None,
                MetricType::Counter,
            )?;
            for (camera, view) in &named {
                let by_reason = view.tally.map_or([0; REASONS], |t| t.by_reason);
                for (reason, n) in Reason::ALL.iter().zip(by_reason) {
                    ConstCounter::new(n).encode(family.encode_family(&CameraVerdictLabels {
                        camera: camera.to_string(),
                        verdict: reason.verdict().as_str(),
                        reason: reason.as_str(),
                    })?)?;
                }
            }
        }
        {
            let mut family = encoder.encode_descriptor(
                "camera_source_up",
                "1 while the camera's source is up (a live one streaming or being opened), else 0",
                None,
                MetricType::Gauge,
            )?;
            for (camera, view) in &named {
                ConstGauge::new(i64::from(view.up)).encode(family.encode_family(
                    &CameraLabels {
                        camera: camera.to_string(),
                    },
                )?)?;
            }
        }
        let genicam: Vec<(&str, u64)> = facts
            .external
            .cameras
            .iter()
            .filter_map(|c| Some((c.name.as_deref()?, c.genicam.as_ref()?.incomplete())))
            .collect();
        if !genicam.is_empty() {
            let mut family = encoder.encode_descriptor(
                "camera_incomplete_frames",
                "Frames the GenICam camera sent that did not arrive whole (lost packets): dropped, \
                 never judged",
                None,
                MetricType::Counter,
            )?;
            for (camera, incomplete) in genicam {
                ConstCounter::new(incomplete).encode(family.encode_family(&CameraLabels {
                    camera: camera.to_string(),
                })?)?;
            }
        }
        let live: Vec<(&str, &SourceStatus)> = named
            .iter()
            .filter_map(|(camera, view)| view.status.map(|s| (*camera, s)))
            .collect();
        if !live.is_empty() {
            let mut family = encoder.encode_descriptor(
                "camera_source_outages",
                "Times the camera's live source was lost (or missing at start) and rebuilt",
                None,
                MetricType::Counter,
            )?;
            for (camera, status) in live {
                ConstCounter::new(status.outages()).encode(family.encode_family(
                    &CameraLabels {
                        camera: camera.to_string(),
                    },
                )?)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::camera_tally::{MinuteBucket, TREND_MINUTES};
    use super::*;
    use crate::decision::Decision;
    use crate::frame::FrameMeta;

    fn decision(reason: Reason) -> Decision {
        Decision {
            verdict: reason.verdict(),
            reason,
            defect_prob: None,
            seal_area: None,
        }
    }

    fn at_minute(minute: u64, second: u64) -> FrameMeta {
        FrameMeta {
            captured_at: UNIX_EPOCH + Duration::from_secs(minute * 60 + second),
            ..FrameMeta::now(minute)
        }
    }

    #[test]
    fn the_trend_keeps_the_last_hour_by_minute_and_forgets_older_minutes() {
        let mut tally = CameraTally::default();
        let now = Instant::now();
        let ok = Reason::ALL.iter().position(|r| *r == Reason::Ok).unwrap();
        let defect = Reason::ALL
            .iter()
            .position(|r| *r == Reason::Defect)
            .unwrap();
        // Minute 1000: 3 passes, 1 fail; minute 1059: 1 fail; minute 1060
        // reuses minute 1000's bucket.
        for s in 0..3 {
            tally.record(&at_minute(1000, s), &decision(Reason::Ok), ok, None, now);
        }
        tally.record(
            &at_minute(1000, 9),
            &decision(Reason::Defect),
            defect,
            None,
            now,
        );
        tally.record(
            &at_minute(1059, 0),
            &decision(Reason::Defect),
            defect,
            None,
            now,
        );
        let trend: Vec<MinuteBucket> = tally.trend(1059).collect();
        assert_eq!(trend.len(), TREND_MINUTES);
        assert_eq!(
            (trend[0].minute, trend[0].passed, trend[0].failed),
            (1000, 3, 1)
        );
        assert_eq!((trend[59].minute, trend[59].failed), (1059, 1));
        assert!(trend[1..59].iter().all(|b| b.passed + b.failed == 0));

        tally.record(&at_minute(1060, 0), &decision(Reason::Ok), ok, None, now);
        let trend: Vec<MinuteBucket> = tally.trend(1060).collect();
        assert_eq!((trend[0].minute, trend[0].failed), (1001, 0));
        assert_eq!((trend[59].minute, trend[59].passed), (1060, 1));
        assert_eq!((trend[58].minute, trend[58].failed), (1059, 1));
        // An hour later nothing of it is left; the shift keeps every result.
        assert!(tally.trend(1200).all(|b| b.passed + b.failed == 0));
        assert_eq!((tally.passed, tally.failed), (4, 2));
        assert_eq!(tally.by_reason[defect], 2);
        // A result from before its bucket's minute (clock set back) leaves
        // the trend alone.
        tally.record(&at_minute(1000, 0), &decision(Reason::Ok), ok, None, now);
        assert_eq!(tally.trend(1060).last().unwrap().passed, 1);
        assert_eq!(tally.passed, 5);
    }

    #[test]
    fn an_outage_names_its_camera() {
        assert_eq!(
            named_outage(
                "side",
                "camera lost since 12:03:04 UTC (40 s, 7 tries), trying now"
            ),
            "camera side lost since 12:03:04 UTC (40 s, 7 tries), trying now"
        );
        assert_eq!(
            named_outage(
                "top",
                "waiting for camera since 12:00:00 UTC (3 s, 1 try), trying now"
            ),
            "waiting for camera top since 12:00:00 UTC (3 s, 1 try), trying now"
        );
    }
}

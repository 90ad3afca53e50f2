//! A camera's cavities as maintenance sees them: `/api/status`'s
//! `cavities` (the layout, the last cycle, each cavity's fail rate over
//! the last `RECENT_CYCLES` cycles and the shift, the worst cavity) and
//! `/metrics`' `sealcheck_cavity_results_total`, both read from the
//! board's snapshot (`cavity_tally::CavityTally`) on the HTTP thread.
//!
//! ```text
//! output thread: StatusBoard::record ─▶ BoardState.cavities[camera] (CavityTally)
//! HTTP thread:   BoardState + the config's layouts (Telemetry::cavity_layouts)
//!                  ─▶ add_cavities (cavities_json): /api/status cameras[i].cavities ─▶ the page's outlines and heat map
//!                  ─▶ CavityCollector: sealcheck_cavity_results_total{camera, cavity, verdict, reason}
//! ```
//!
//! The counter's `camera` label is the camera's name as the per-camera
//! series have it (`camera_results`); a `[source]` camera's series carry
//! no `camera` label, as its other series have none.

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use serde_json::{Value, json};

use super::board::BoardState;
use super::cameras;
use super::cavity_tally::{CavityTally, Fails, RECENT_CYCLES};
use super::run_report::RunFacts;
use crate::config::CavityLayout;
use crate::decision::Reason;

/// Adds `cavities` to each camera of `/api/status`'s `cameras` (the
/// objects `cameras::cameras_json` made from `views`, in the same order):
/// `null` for a camera without a layout.
pub fn add_cavities(
    cameras: &mut Value,
    views: &[cameras::CameraView<'_>],
    layouts: &[Option<Arc<CavityLayout>>],
) {
    let Some(cameras) = cameras.as_array_mut() else {
        return;
    };
    for (i, (camera, view)) in cameras.iter_mut().zip(views).enumerate() {
        let layout = layouts.get(i).and_then(Option::as_deref);
        camera["cavities"] = cavities_json(view.cavities, layout);
    }
}

/// `/api/status`'s `cavities` of one camera: `null` without a layout.
pub fn cavities_json(tally: Option<&CavityTally>, layout: Option<&CavityLayout>) -> Value {
    let fresh;
    let t = match (tally, layout) {
        (Some(t), _) => t,
        (None, Some(l)) => {
            fresh = CavityTally::for_layout(l.count(), l.enabled_mask());
            &fresh
        }
        (None, None) => return Value::Null,
    };
    let count = layout.map_or(t.count(), CavityLayout::count);
    let enabled = |n: u16| layout.map_or(t.is_enabled(n), |l| l.is_enabled(n));
    let (shift_cycles, recent_cycles) = t.cycles();
    let fails = |f: Fails| json!({"judged": f.judged, "fail": f.failed, "rate": f.rate()});
    let layout_json: Vec<Value> = (1..=count)
        .map(|n| {
            let on = enabled(n);
            json!({
                "cavity": n,
                "rect": layout.map(|l| {
                    let r = l.rect(n);
                    [r.x, r.y, r.width, r.height]
                }),
                "enabled": on,
                "recent": on.then(|| fails(t.recent(n))),
                "shift": on.then(|| fails(t.shift(n))),
            })
        })
        .collect();
    let grid = layout
        .and_then(|l| l.grid)
        .map(|(rows, cols)| json!({"rows": rows, "cols": cols}));
    let last = t.last().map(|c| {
        json!({
            "seq": c.seq,
            "part_id": c.part_id,
            "ts": rfc3339(c.captured_at),
            "cavities": (1..=count)
                .filter_map(|n| c.cavity(n).map(|(verdict, reason)| json!({
                    "cavity": n,
                    "verdict": verdict.as_str(),
                    "reason": reason.as_str(),
                })))
                .collect::<Vec<_>>(),
        })
    });
    json!({
        "count": count,
        "grid": grid,
        "window": RECENT_CYCLES,
        "cycles": {"recent": recent_cycles, "shift": shift_cycles},
        "layout": layout_json,
        "last": last,
        "worst": t.worst().map(|w| json!({
            "cavity": w.cavity,
            "recent": w.recent,
            "shift": w.shift,
        })),
    })
}

fn rfc3339(t: std::time::SystemTime) -> String {
    let mut s = String::with_capacity(24);
    crate::timestamp::write_rfc3339(&mut s, t);
    s
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CameraCavityLabels {
    camera: String,
    cavity: String,
    verdict: &'static str,
    reason: &'static str,
}

/// A `[source]` camera's: no `camera` label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CavityLabels {
    cavity: String,
    verdict: &'static str,
    reason: &'static str,
}

/// `sealcheck_cavity_results_total`, read at scrape time from the board's
/// latest snapshot: every judged cavity of every camera with a layout, by
/// verdict and reason (each reason from the start, at 0).
#[derive(Clone)]
pub struct CavityCollector(pub Arc<dyn Fn() -> (RunFacts, BoardState) + Send + Sync>);

impl std::fmt::Debug for CavityCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CavityCollector")
    }
}

impl Collector for CavityCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let (facts, board) = (self.0)();
        if board.cavities.iter().all(Option::is_none) {
            return Ok(());
        }
        let named = cameras::named(&facts);
        let views = cameras::cameras(&facts, &board, Duration::ZERO, std::time::Instant::now());
        let mut family = encoder.encode_descriptor(
            "cavity_results",
            "Judged cavities of each machine cycle, by camera, cavity, verdict and reason (a camera with a cavity layout)",
            None,
            MetricType::Counter,
        )?;
        for (index, tally) in board.cavities.iter().enumerate() {
            let Some(tally) = tally else { continue };
            let camera = views.get(index).and_then(|v| v.name);
            if named && camera.is_none() {
                // Its name is not reported yet: no series under a wrong one.
                continue;
            }
            for number in tally.enabled() {
                let cavity = number.to_string();
                for (reason, n) in Reason::ALL.iter().zip(tally.by_reason(number)) {
                    let counter = ConstCounter::new(n);
                    let (verdict, reason) = (reason.verdict().as_str(), reason.as_str());
                    match camera {
                        Some(camera) => {
                            counter.encode(family.encode_family(&CameraCavityLabels {
                                camera: camera.to_string(),
                                cavity: cavity.clone(),
                                verdict,
                                reason,
                            })?)?
                        }
                        None => counter.encode(family.encode_family(&CavityLabels {
                            cavity: cavity.clone(),
                            verdict,
                            reason,
                        })?)?,
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::CavityRect;
    use crate::cycle::CycleVerdicts;
    use crate::decision::Decision;
    use crate::frame::FrameMeta;

    fn grid_2x3(disabled: &[u16]) -> CavityLayout {
        let rects = CavityLayout::grid_rects(2, 3, (320, 180), (640, 360), (600, 340)).unwrap();
        CavityLayout::new(rects, disabled, 0, Some((2, 3))).unwrap()
    }

    fn cycle(layout: &CavityLayout, failing: &[u16]) -> CycleVerdicts {
        let mut cycle = CycleVerdicts::with_capacity(6);
        cycle.start(layout);
        for n in layout.enabled() {
            let reason = if failing.contains(&n) {
                Reason::Defect
            } else {
                Reason::Ok
            };
            cycle.push(
                n,
                Decision {
                    verdict: reason.verdict(),
                    reason,
                    defect_prob: None,
                    seal_area: None,
                },
            );
        }
        cycle
    }

    #[test]
    fn api_status_gives_the_layout_the_last_cycle_the_rates_and_the_worst_cavity() {
        let layout = grid_2x3(&[6]);
        assert_eq!(cavities_json(None, None), Value::Null);
        let before = cavities_json(None, Some(&layout));
        assert_eq!(before["count"], 6);
        assert_eq!(before["last"], Value::Null);
        assert_eq!(before["worst"], Value::Null);
        assert_eq!(before["layout"][0]["recent"]["rate"], Value::Null);

        let mut tally = CavityTally::for_layout(6, layout.enabled_mask());
        for seq in 0..4u64 {
            let failing: &[u16] = if seq % 2 == 0 { &[2] } else { &[2, 4] };
            tally.record(&FrameMeta::now(seq), &cycle(&layout, failing));
        }
        let json = cavities_json(Some(&tally), Some(&layout));
        assert_eq!(json["grid"], json!({"rows": 2, "cols": 3}));
        assert_eq!(json["window"], RECENT_CYCLES);
        assert_eq!(json["cycles"], json!({"recent": 4, "shift": 4}));
        assert_eq!(json["layout"][0]["rect"], json!([20, 10, 600, 340]));
        assert_eq!(json["layout"][5]["enabled"], false);
        assert_eq!(json["layout"][5]["recent"], Value::Null);
        assert_eq!(
            json["layout"][1]["recent"],
            json!({"judged": 4, "fail": 4, "rate": 1.0})
        );
        assert_eq!(json["layout"][3]["shift"]["rate"], 0.5);
        assert_eq!(json["last"]["seq"], 3);
        let last = json["last"]["cavities"].as_array().unwrap();
        assert_eq!(last.len(), 5, "the disabled cavity has no verdict");
        assert_eq!(
            last[3],
            json!({"cavity": 4, "verdict": "fail", "reason": "defect"})
        );
        assert_eq!(json["worst"]["cavity"], 2);
    }

    #[test]
    fn a_list_layout_has_no_grid_and_a_cycle_without_a_known_layout_still_shows() {
        let rects = vec![
            CavityRect {
                x: 0,
                y: 0,
                width: 10,
                height: 10,
            },
            CavityRect {
                x: 20,
                y: 0,
                width: 10,
                height: 10,
            },
        ];
        let layout = CavityLayout::new(rects, &[], 0, None).unwrap();
        let mut tally = CavityTally::default();
        tally.record(&FrameMeta::now(1), &cycle(&layout, &[1]));
        let json = cavities_json(Some(&tally), None);
        assert_eq!(json["grid"], Value::Null);
        assert_eq!(json["count"], 2);
        assert_eq!(json["layout"][0]["rect"], Value::Null);
        assert_eq!(json["worst"]["cavity"], 1);
    }
}

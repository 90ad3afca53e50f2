//! A live source that is lost is rebuilt, inside the process, for as long as it
//! takes. Only the source's GStreamer pipeline goes; the ring, its producer and
//! the `seq` counter (all in `CaptureShared`) stay, and so does everything
//! downstream (models, CUDA context, output).
//!
//! ```text
//!           ┌──────────── first frame: outage ends (logged once, with length and tries)
//!           ▼
//! watch(pipeline) ── error / EOS / no frame for frame_timeout ──▶ outage (logged once, now)
//!     ▲                                                                    │
//!     │                                                  teardown: wake a blocked streaming
//!     │                                                  thread, NULL within 2 s or abandon
//!     │                                                                    │
//!     └── open_pipeline ◀── wait retry_min, 2x, 4x ... retry_max ◀─────────┘
//! ```
//!
//! The outage is logged before the teardown: a pipeline whose element is
//! blocked may take the whole `teardown::TEARDOWN_LIMIT` to be abandoned, and
//! the line should learn of the lost camera when it is lost.
//!
//! A stop or shutdown ends it at any point with `End(Stopped)`. A problem no
//! retry can fix (a missing plugin, a launch line that does not parse) ends it
//! with `End(Error)`, as at start.

use std::sync::Arc;
use std::time::{Duration, Instant};

use gstreamer as gst;

use super::bus::{self, Watched};
use super::error::{CaptureError, EndOfStream};
use super::launch;
use super::open::{Running, open_pipeline};
use super::state::CaptureShared;
use super::status::Backoff;
use super::teardown;
use crate::config::SourceConfig;

/// Before a rebuilt (or first) pipeline's first frame, the frame timeout is at
/// least this: connecting to a camera and its first key frame take a while.
const FIRST_FRAME_TIMEOUT: Duration = Duration::from_secs(5);
/// Floor of the default frame timeout (ten frame intervals, at least this).
const MIN_FRAME_TIMEOUT: Duration = Duration::from_secs(1);
/// Default frame timeout while the caps name no fixed rate.
const UNKNOWN_RATE_FRAME_TIMEOUT: Duration = Duration::from_secs(2);
/// Default frame timeout of a triggered camera (`kind = "genicam"` with a
/// trigger): a line may stand still for a shift.
const TRIGGERED_FRAME_TIMEOUT: Duration = Duration::from_secs(24 * 3600);
/// How often the wait between tries looks at the stop and shutdown flags.
const WAIT_SLICE: Duration = Duration::from_millis(20);

/// Whether an error at start or on a rebuild may go away by itself (the camera
/// is unplugged, rebooting, unreachable) rather than needing a person.
pub(crate) fn may_recover(error: &CaptureError) -> bool {
    matches!(error, CaptureError::Start { .. } | CaptureError::Bus { .. })
}

/// Records a lost source; logs it only when this begins an outage.
pub(crate) fn source_lost(shared: &CaptureShared, reason: &str, frozen: bool, at_start: bool) {
    shared.set_streaming(false);
    if !shared.status.lost(reason, frozen, at_start) {
        return;
    }
    shared.liveness.set_source_lost(true);
    let Some(recovery) = shared.recovery else {
        return;
    };
    let what = if at_start {
        "source not available at start; inspection waits for it"
    } else {
        "source lost; rebuilding it until it is back"
    };
    log::warn!(target: "sealcheck::capture", source = shared.origin.as_str(), error = reason,
        frozen = frozen, outages = shared.status.outages(), frames = shared.frames_delivered(),
        retry_min_ms = recovery.retry_min.as_millis() as u64, retry_max_ms = recovery.retry_max.as_millis() as u64;
        "{what}: {reason}");
}

/// The capture thread of a live source: watches the pipeline and rebuilds it
/// whenever it is lost. `first` is `None` when the source was missing at start.
pub(crate) fn run(shared: Arc<CaptureShared>, source: SourceConfig, first: Option<Running>) {
    let Some(recovery) = shared.recovery else {
        return;
    };
    let hint = launch::hint(&source.kind);
    let triggered = source.kind.is_triggered();
    let frame_timeout = |since_first_frame: bool| {
        // A triggered camera sends frames only when triggered: silence is no
        // frozen camera (a dead one ends its stream by itself: `aravissrc`).
        if triggered {
            return recovery.frame_timeout.unwrap_or(TRIGGERED_FRAME_TIMEOUT);
        }
        let steady = recovery.frame_timeout.unwrap_or_else(|| {
            shared
                .frame_interval()
                .map_or(UNKNOWN_RATE_FRAME_TIMEOUT, |interval| {
                    (interval * 10).max(MIN_FRAME_TIMEOUT)
                })
        });
        if since_first_frame {
            steady
        } else {
            steady.max(FIRST_FRAME_TIMEOUT)
        }
    };
    let mut backoff = Backoff::new(recovery.retry_min, recovery.retry_max);
    let mut running = first;
    loop {
        if let Some(run) = running.take() {
            let delivered_before = shared.frames_delivered();
            let timeout = || frame_timeout(shared.frames_delivered() > delivered_before);
            let watched = bus::watch(
                &run.pipeline,
                &run.bus,
                &shared,
                hint,
                run.saw_eos,
                Some(&timeout),
            );
            let (reason, frozen) = match watched {
                // Asked to stop: whatever the camera did meanwhile, the run was stopped.
                Watched::End(_) if shared.ending() => {
                    bus::finish(&run.pipeline, &shared, EndOfStream::Stopped);
                    return;
                }
                Watched::End(EndOfStream::Stopped) => {
                    bus::finish(&run.pipeline, &shared, EndOfStream::Stopped);
                    return;
                }
                Watched::End(EndOfStream::Error(e)) => (e.to_string(), false),
                Watched::End(_) => (
                    "the source ended its stream (end-of-stream)".to_string(),
                    false,
                ),
                // The hint too: a camera that opens and sends nothing (a GigE
                // camera read as root: capture::net_raw) has no error to carry it.
                Watched::Frozen { waited } => (
                    format!(
                        "no frame for {:.1} s, with no error and no end-of-stream (frozen source) — {hint}",
                        waited.as_secs_f64()
                    ),
                    true,
                ),
            };
            if shared.status.is_up() {
                // The pipeline delivered frames: a new outage, tries start short again.
                backoff.reset();
            } else {
                shared.status.try_failed(&reason);
            }
            source_lost(&shared, &reason, frozen, false);
            teardown(&run.pipeline, &shared);
        }
        let delay = backoff.next_delay();
        let at = Instant::now() + delay;
        shared.status.next_try_at(at);
        if !wait_until(&shared, at) {
            shared.end(EndOfStream::Stopped);
            return;
        }
        shared.status.trying();
        log::debug!(target: "sealcheck::capture", source = shared.origin.as_str(), tries = shared.status.tries_this_outage(); "rebuilding the source");
        match open_pipeline(&source, &shared, false) {
            Ok(run) => {
                shared.liveness.rebuild_started(true);
                shared.set_pipeline(Some(run.pipeline.clone()));
                running = Some(run);
            }
            Err(e) if may_recover(&e) => {
                let reason = e.to_string();
                log::debug!(target: "sealcheck::capture", source = shared.origin.as_str(), error = reason.as_str(); "the source is not back yet");
                shared.status.try_failed(&reason);
                shared.liveness.rebuild_started(false);
            }
            Err(e) => {
                // Not something time fixes (a plugin or the launch line): end as at start.
                shared.liveness.set_source_lost(false);
                shared.end(EndOfStream::Error(e));
                return;
            }
        }
    }
}

/// Ends a lost pipeline: a streaming thread waiting for a slot is woken (its
/// frame is counted as dropped), the pipeline goes to NULL or, blocked, is
/// abandoned (`teardown`), and the ring is made ready for the next pipeline.
fn teardown(pipeline: &gst::Pipeline, shared: &Arc<CaptureShared>) {
    // Stopped or abandoned (counted and logged there), the next pipeline is built.
    let _ = teardown::stop_pipeline(pipeline, shared, "the source was lost");
    shared.set_pipeline(None);
    // A GigE Vision camera's control channel is released with its last reference.
    if let Some(link) = &shared.genicam {
        link.set_camera(None);
        link.log_counts("at the loss");
    }
    shared.ready_for_rebuild();
}

/// Sleeps until `at`; false when a stop or shutdown came first.
fn wait_until(shared: &CaptureShared, at: Instant) -> bool {
    loop {
        shared.liveness.capture_heartbeat();
        if shared.ending() {
            return false;
        }
        let now = Instant::now();
        if now >= at {
            return true;
        }
        std::thread::sleep(WAIT_SLICE.min(at - now));
    }
}

//! Taking a pipeline to NULL without trusting it to get there.
//!
//! ```text
//! capture thread ──spawn──▶ "source-teardown": pipeline.set_state(NULL) ──▶ done ─┐
//!      │                                                                            │
//!      └── waits up to TEARDOWN_LIMIT ◀─────────────────────────────────────────────┘
//!             in time: Stopped          too late: Abandoned (thread left behind)
//! ```
//!
//! Setting NULL waits for every streaming thread to leave its element. A source
//! element blocked in a read or a driver call never leaves: `filesrc` or `fdsrc`
//! on a named pipe or another program's stdout that stopped writing,
//! `nvarguscamerasrc` when the sensor stops (known on Jetsons), a V4L2 driver
//! stuck in an ioctl. Done on the capture thread, that wait would hang capture,
//! and with it recovery and the service's stop. So the wait runs on a thread of
//! its own, and after `TEARDOWN_LIMIT` the pipeline is abandoned: the thread
//! stays behind (it may finish one day, or never), the pipeline's callbacks are
//! already retired (`CaptureShared::retire_pipeline`), so nothing it might still
//! deliver reaches the ring, and the caller builds a new pipeline as for any
//! lost source. Abandoned pipelines are counted once, in the camera's
//! `Liveness` record (`Liveness::pipeline_abandoned`), which stops the
//! watchdog pings when they pile up; `SourceStatus` (`/metrics`, the page)
//! reads the count from there.

use std::sync::Arc;
use std::time::Duration;

use gstreamer as gst;
use gstreamer::prelude::*;

use super::state::CaptureShared;

/// Longest a pipeline may take to reach NULL before it is abandoned.
pub(crate) const TEARDOWN_LIMIT: Duration = Duration::from_secs(2);

/// How taking a pipeline to NULL ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Teardown {
    /// The pipeline reached NULL (or refused, which GStreamer reports at once).
    Stopped,
    /// It did not reach NULL within `TEARDOWN_LIMIT`: left behind, counted, logged.
    Abandoned,
}

/// Retires `pipeline`'s callbacks, wakes a streaming thread that waits for a
/// slot, and sets the pipeline to NULL, waiting at most `TEARDOWN_LIMIT`.
/// `why` says in the log what the pipeline was being stopped for.
pub(crate) fn stop_pipeline(
    pipeline: &gst::Pipeline,
    shared: &Arc<CaptureShared>,
    why: &str,
) -> Teardown {
    stop_pipeline_within(pipeline, shared, why, TEARDOWN_LIMIT)
}

fn stop_pipeline_within(
    pipeline: &gst::Pipeline,
    shared: &Arc<CaptureShared>,
    why: &str,
    limit: Duration,
) -> Teardown {
    // Wake first: a streaming thread waiting for a slot holds the producer
    // lock that retiring takes.
    shared.abort_waits();
    shared.retire_pipeline();
    let (done_tx, done_rx) = crossbeam_channel::bounded::<bool>(1);
    let spawned = {
        let (pipeline, shared) = (pipeline.clone(), Arc::clone(shared));
        std::thread::Builder::new()
            .name("source-teardown".into())
            .spawn(move || {
                let refused = pipeline.set_state(gst::State::Null).is_err();
                // Nobody waits any more when the pipeline was abandoned; it
                // finally stopped, and the count of those still stuck goes down.
                if done_tx.send(refused).is_err() {
                    shared.liveness.abandoned_teardown_ended();
                    log::info!(target: "sealcheck::capture", source = shared.origin.as_str();
                        "an abandoned pipeline reached NULL after all; its thread has ended");
                }
            })
    };
    if let Err(e) = spawned {
        // No thread to spare: wait here, as GStreamer itself would.
        log::warn!(target: "sealcheck::capture", source = shared.origin.as_str(), error = e.to_string().as_str();
            "cannot start a teardown thread; stopping the pipeline on the capture thread");
        if pipeline.set_state(gst::State::Null).is_err() {
            log::warn!(target: "sealcheck::capture", source = shared.origin.as_str(); "the pipeline refused to go to NULL");
        }
        return Teardown::Stopped;
    }
    shared.liveness.capture_heartbeat();
    let outcome = done_rx.recv_timeout(limit);
    shared.liveness.capture_heartbeat();
    match outcome {
        Ok(refused) => {
            if refused {
                log::warn!(target: "sealcheck::capture", source = shared.origin.as_str(); "the pipeline refused to go to NULL ({why})");
            }
            Teardown::Stopped
        }
        Err(_) => {
            // Dropping the receiver tells the teardown thread nobody waits for it.
            drop(done_rx);
            // Counted once, in the camera's liveness record; `SourceStatus`
            // (the metrics, the page) reads it from there.
            let in_a_row = shared.liveness.pipeline_abandoned();
            let abandoned = shared.liveness.abandoned();
            log::error!(target: "sealcheck::capture", source = shared.origin.as_str(),
                waited_ms = limit.as_millis() as u64, abandoned = abandoned, abandoned_in_a_row = in_a_row;
                "the pipeline did not stop within {:.1} s ({why}): an element is blocked in a read or a driver call \
                 (filesrc/fdsrc on a pipe that stopped, nvarguscamerasrc after a sensor fault, a camera driver stuck in an ioctl); \
                 it is abandoned and its thread left behind; {}",
                limit.as_secs_f64(),
                if shared.ending() { "capture ends" } else { "a new pipeline is built" });
            Teardown::Abandoned
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::OverflowPolicy;
    use crate::service::Liveness;

    fn shared(liveness: &Liveness) -> Arc<CaptureShared> {
        let (producer, _consumer) = crate::ring::frame_ring(2);
        Arc::new(CaptureShared::new(
            "test source".into(),
            OverflowPolicy::Drop,
            2,
            true,
            producer,
            liveness.clone(),
        ))
    }

    fn launch(line: &str) -> gst::Pipeline {
        crate::capture::library::init().unwrap();
        gst::parse::launch(line)
            .unwrap()
            .downcast::<gst::Pipeline>()
            .unwrap()
    }

    #[test]
    fn a_pipeline_that_stops_is_not_abandoned() {
        let liveness = Liveness::new();
        let shared = shared(&liveness);
        let pipeline = launch("videotestsrc is-live=true ! fakesink");
        pipeline.set_state(gst::State::Playing).unwrap();
        let started = std::time::Instant::now();
        assert_eq!(stop_pipeline(&pipeline, &shared, "test"), Teardown::Stopped);
        assert!(started.elapsed() < TEARDOWN_LIMIT);
        assert_eq!(shared.status.abandoned(), 0);
        assert_eq!(pipeline.current_state(), gst::State::Null);
    }

    /// A `filesrc` reading a named pipe that a writer holds open but no
    /// longer writes to blocks in read(2) (filesrc has no way to interrupt
    /// it) and keeps its streaming thread from ever leaving: the case this
    /// module exists for.
    #[test]
    fn a_source_blocked_in_a_read_is_abandoned_within_the_limit() {
        let liveness = Liveness::new();
        let shared = shared(&liveness);
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("camera.fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success(), "mkfifo failed");
        // Read and write: opening a FIFO this way does not wait for a reader.
        let writer = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&fifo)
            .unwrap();
        let pipeline = launch(&format!(
            "filesrc location={} ! fakesink sync=false",
            fifo.display()
        ));
        pipeline.set_state(gst::State::Playing).unwrap();
        // Let the streaming thread enter its read.
        std::thread::sleep(Duration::from_millis(200));
        let limit = Duration::from_millis(300);
        let started = std::time::Instant::now();
        assert_eq!(
            stop_pipeline_within(&pipeline, &shared, "test", limit),
            Teardown::Abandoned
        );
        let waited = started.elapsed();
        assert!(waited >= limit && waited < limit * 5, "{waited:?}");
        assert_eq!(shared.status.abandoned(), 1);
        assert_eq!(liveness.abandoned_in_a_row(), 1);
        // The last writer gone, the read returns: the abandoned teardown
        // finishes and says so.
        drop(writer);
        let until = std::time::Instant::now() + Duration::from_secs(5);
        while shared.status.abandoned_still_stuck() > 0 && std::time::Instant::now() < until {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(shared.status.abandoned_still_stuck(), 0);
    }
}

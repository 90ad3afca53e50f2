//! The verdict on the pipeline at one moment (`Health`), read from the heartbeat
//! record: alive, idle, waiting for or rebuilding a source, stalled at a stage, an engine
//! failing every frame, or a camera's source stuck beyond what capture can rebuild.

use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};

use super::record::{Liveness, SourceRecord, Stage};
use crate::frame::FailedStage;

/// A capture thread that manages its source (see `Liveness::set_source_managed`)
/// and has not beaten for this long (or the stall timeout, if longer) is stuck.
const CAPTURE_BEAT_LIMIT: Duration = Duration::from_secs(3);

/// Live-source pipelines abandoned in a row (none delivering a frame between
/// them) after which the source counts as stuck: each one left a thread
/// blocked in an element, and only a new process frees them.
pub const MAX_ABANDONED_IN_A_ROW: u64 = 3;

/// The verdict on the pipeline at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Health {
    /// Inspected results moved within the stall timeout (or frames entered the pipeline
    /// less than a stall timeout ago).
    Alive { in_flight: u64 },
    /// Nothing in flight and the source is streaming: waiting for frames (a triggered
    /// camera, a paused line).
    Idle,
    /// Nothing in flight and the source is not streaming, for less than the stall timeout
    /// (opening the camera, a short reconnect).
    WaitingForSource { for_: Duration },
    /// Nothing in flight and a live source lost, with capture rebuilding it (see
    /// `Liveness::set_source_lost`): the process is healthy and a restart would
    /// not bring the camera back, so the watchdog keeps pinging. The status text
    /// says since when and when the next try comes.
    SourceLost { for_: Duration },
    /// Frames in flight but no inspected result for `for_` (longer than the stall
    /// timeout), or the source not streaming for that long; `stage` is where frames most
    /// likely stopped.
    Stalled {
        stage: Stage,
        for_: Duration,
        in_flight: u64,
    },
    /// Every frame since the last inspected result failed in preprocessing or a
    /// model, for `for_` (at least the stall timeout, from the first failure to the
    /// latest): the engine is broken, and a restart is the remedy worth trying.
    Failing { stage: FailedStage, for_: Duration },
    /// A camera's live source that capture cannot bring back inside the
    /// process; a restart can. Its pipelines do not stop when it is lost:
    /// capture abandoned `in_a_row` of them in a row (at least
    /// `MAX_ABANDONED_IN_A_ROW`), or one it abandoned still blocks
    /// (`still_stuck`) and no new pipeline has started for `for_` (a stall
    /// timeout or more: the device stays busy, held by the pipeline left
    /// behind). Or (`capture_silent`, a camera after the first) its capture
    /// thread has not beaten for `for_` while the source is down: blocked in
    /// a driver call or ended, nothing rebuilds the source.
    SourceStuck {
        in_a_row: u64,
        still_stuck: u64,
        for_: Duration,
        capture_silent: bool,
        /// Whose source: `None` for the first camera's (the only one with
        /// `[source]`; `Liveness::source_name` names it), else the name
        /// capture gave another camera's (`camera side: RTSP camera ...`).
        camera: Option<Arc<str>>,
    },
}

impl Health {
    /// Whether the watchdog should be pinged.
    pub fn is_alive(&self) -> bool {
        !matches!(
            self,
            Health::Stalled { .. } | Health::Failing { .. } | Health::SourceStuck { .. }
        )
    }
}

impl SourceRecord {
    /// `Health::SourceStuck` (of no camera named) when abandoned pipelines
    /// piled up, or when rebuilds have failed to start for a stall timeout
    /// while one still blocks.
    fn stuck(&self, now_stamp: u64, stall_timeout: Duration) -> Option<Health> {
        let in_a_row = self.abandoned_in_a_row.load(Ordering::Relaxed);
        let still_stuck = self.abandoned_stuck.load(Ordering::Relaxed);
        let ago = |t: u64| Duration::from_nanos(now_stamp.saturating_sub(t));
        if in_a_row >= MAX_ABANDONED_IN_A_ROW {
            return Some(Health::SourceStuck {
                in_a_row,
                still_stuck,
                for_: ago(self.last_abandoned.load(Ordering::Relaxed)),
                capture_silent: false,
                camera: None,
            });
        }
        let refused_since = self.refused_while_abandoned_since.load(Ordering::Relaxed);
        (still_stuck > 0 && refused_since != 0 && ago(refused_since) >= stall_timeout).then(|| {
            Health::SourceStuck {
                in_a_row,
                still_stuck,
                for_: ago(refused_since),
                capture_silent: false,
                camera: None,
            }
        })
    }

    /// `Health::SourceStuck` (of no camera named) when capture manages this
    /// source, the source has been down for longer than the stall timeout,
    /// and the capture thread has not beaten for as long as it may (blocked
    /// in a driver call, or ended): nothing will rebuild the source. A source
    /// down while its thread beats is being rebuilt: capture's business. A
    /// source capture does not manage (a file, a replay) ends for good at its
    /// end of stream while the others go on, and has no thread to judge.
    fn capture_silent(&self, now_stamp: u64, stall_timeout: Duration) -> Option<Health> {
        if !self.source_managed.load(Ordering::Relaxed)
            || self.source_streaming.load(Ordering::Relaxed)
        {
            return None;
        }
        let ago = |t: u64| Duration::from_nanos(now_stamp.saturating_sub(t));
        let down_for = ago(self.source_since.load(Ordering::Relaxed));
        let silent_for = ago(self.capture_beat.load(Ordering::Relaxed));
        (down_for > stall_timeout && silent_for > stall_timeout.max(CAPTURE_BEAT_LIMIT)).then(
            || Health::SourceStuck {
                in_a_row: self.abandoned_in_a_row.load(Ordering::Relaxed),
                still_stuck: self.abandoned_stuck.load(Ordering::Relaxed),
                for_: silent_for,
                capture_silent: true,
                camera: None,
            },
        )
    }
}

impl Liveness {
    /// Health at `now`, after recording `source_streaming` (see `set_source_streaming`):
    /// alive while inspected results moved within `stall_timeout`, or while nothing is
    /// in flight and the source is streaming.
    /// With several cameras the probe's answer (any camera streaming) is
    /// not recorded: each camera's capture keeps its own record, the first
    /// camera's included, and the station's state is read from all of them.
    pub fn is_alive(
        &self,
        now: Instant,
        stall_timeout: Duration,
        source_streaming: bool,
    ) -> Health {
        if self.station_source().is_none() {
            self.set_source_streaming(source_streaming);
        }
        self.health(now, stall_timeout)
    }

    /// With several cameras: whether any camera's source streams, and the
    /// latest change of any of them (a stamp); `None` with one camera.
    fn station_source(&self) -> Option<(bool, u64)> {
        let others = self
            .shared
            .other_sources
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if others.is_empty() {
            return None;
        }
        let every = std::iter::once(&self.shared.first_source).chain(others.iter());
        Some(every.fold((false, 0), |(streaming, since), source| {
            (
                streaming || source.source_streaming.load(Ordering::Relaxed),
                since.max(source.source_since.load(Ordering::Relaxed)),
            )
        }))
    }

    /// Health at `now` with the source state last recorded: the station's,
    /// whichever camera's handle asks.
    pub fn health(&self, now: Instant, stall_timeout: Duration) -> Health {
        let s = &self.shared;
        let in_flight = self.in_flight();
        let last_inspected = s.last_inspected.load(Ordering::Relaxed);
        let now_stamp = self.stamp(now);
        let ago = |t: u64| Duration::from_nanos(now_stamp.saturating_sub(t));
        let first = &s.first_source;

        if let Some(stuck) = self.stuck_camera(now_stamp, stall_timeout) {
            return stuck;
        }
        // Measured between failures, not up to now: a short run of failures
        // followed by a quiet camera is not a broken engine.
        let failing_since = s.failing_since.load(Ordering::Relaxed);
        if failing_since != 0 {
            let failing_for = Duration::from_nanos(
                s.last_failure
                    .load(Ordering::Relaxed)
                    .saturating_sub(failing_since),
            );
            if failing_for >= stall_timeout {
                return Health::Failing {
                    stage: failed_stage(s.failed_stage.load(Ordering::Relaxed)),
                    for_: failing_for,
                };
            }
        }
        if in_flight > 0 {
            let quiet_for = ago(last_inspected.max(s.busy_since.load(Ordering::Relaxed)));
            if quiet_for <= stall_timeout {
                return Health::Alive { in_flight };
            }
            return Health::Stalled {
                stage: self.stuck_stage(),
                for_: quiet_for,
                in_flight,
            };
        }
        if last_inspected != 0 && ago(last_inspected) <= stall_timeout {
            return Health::Alive { in_flight: 0 };
        }
        // The station's source: the one camera's, or with several whether
        // any streams, down since the last of them changed.
        let (streaming, since) = self.station_source().unwrap_or((
            first.source_streaming.load(Ordering::Relaxed),
            first.source_since.load(Ordering::Relaxed),
        ));
        if streaming {
            return Health::Idle;
        }
        let down_for = ago(since);
        let managed = first.source_managed.load(Ordering::Relaxed)
            && ago(first.capture_beat.load(Ordering::Relaxed))
                <= stall_timeout.max(CAPTURE_BEAT_LIMIT);
        if managed && first.source_lost.load(Ordering::Relaxed) {
            return Health::SourceLost { for_: down_for };
        }
        if down_for <= stall_timeout || managed {
            Health::WaitingForSource { for_: down_for }
        } else {
            Health::Stalled {
                stage: Stage::Capture,
                for_: down_for,
                in_flight: 0,
            }
        }
    }

    /// The first camera, in set-up order, whose source capture cannot bring
    /// back inside the process: `Health::SourceStuck`, naming it unless it
    /// is the first camera. Every camera's source is judged alike for
    /// abandoned pipelines. With several cameras every camera's also when
    /// it is down and its capture thread went silent, the first's included
    /// (its record is its capture's own; the watchdog's probe goes to the
    /// station's): alone, that camera is `Health::Stalled` at capture once
    /// the pipeline is empty, but among others that inspect the pipeline is
    /// never empty.
    fn stuck_camera(&self, now_stamp: u64, stall_timeout: Duration) -> Option<Health> {
        let first = &self.shared.first_source;
        if let Some(stuck) = first.stuck(now_stamp, stall_timeout) {
            return Some(stuck);
        }
        let others = self
            .shared
            .other_sources
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if !others.is_empty()
            && let Some(silent) = first.capture_silent(now_stamp, stall_timeout)
        {
            return Some(silent);
        }
        others.iter().find_map(|source| {
            let mut stuck = source
                .stuck(now_stamp, stall_timeout)
                .or_else(|| source.capture_silent(now_stamp, stall_timeout))?;
            if let Health::SourceStuck { camera, .. } = &mut stuck {
                *camera = Some(source.name());
            }
            Some(stuck)
        })
    }

    /// The stage that stopped first: its last hand-off is the oldest. A stage that never
    /// handed a frame on is older than any that did; ties go to the earlier stage.
    fn stuck_stage(&self) -> Stage {
        let mut oldest = Stage::Capture;
        let mut oldest_time = u64::MAX;
        for stage in Stage::ALL {
            let t = self.shared.last_advance[stage as usize].load(Ordering::Relaxed);
            if t < oldest_time {
                oldest = stage;
                oldest_time = t;
            }
        }
        oldest
    }
}

fn failed_stage(code: u8) -> FailedStage {
    [
        FailedStage::Capture,
        FailedStage::Preprocess,
        FailedStage::Segment,
        FailedStage::Classify,
    ]
    .into_iter()
    .find(|stage| *stage as u8 == code)
    .unwrap_or(FailedStage::Segment)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::liveness::testing::{
        FRONT, SIDE, STALL, after, failed_frame, full_frame, live_camera,
        lost_with_pipelines_abandoned, streaming,
    };
    use crate::service::liveness::text::{status_line, stuck_source_reason};

    const SHORT_STALL: Duration = Duration::from_millis(50);

    #[test]
    fn an_engine_failing_every_frame_is_not_alive_though_results_move() {
        let l = streaming();
        full_frame(&l);
        failed_frame(&l, FailedStage::Segment);
        std::thread::sleep(SHORT_STALL + Duration::from_millis(10));
        failed_frame(&l, FailedStage::Classify);
        let health = l.health(Instant::now(), SHORT_STALL);
        let Health::Failing { stage, for_ } = health else {
            panic!("{health:?}");
        };
        assert_eq!(stage, FailedStage::Classify);
        assert!(for_ >= SHORT_STALL, "{for_:?}");
        assert!(!health.is_alive());
        let line = status_line(&health, "12.0 fps");
        assert!(
            line.starts_with("FAILING: every frame has failed in classify"),
            "{line}"
        );
    }

    #[test]
    fn an_inspected_result_ends_a_run_of_failures() {
        let l = streaming();
        failed_frame(&l, FailedStage::Segment);
        std::thread::sleep(SHORT_STALL + Duration::from_millis(10));
        full_frame(&l);
        failed_frame(&l, FailedStage::Segment);
        // Alive, or Idle if this machine paused for longer than SHORT_STALL.
        let health = l.health(Instant::now(), SHORT_STALL);
        assert!(health.is_alive(), "{health:?}");
    }

    #[test]
    fn a_short_run_of_failures_before_a_quiet_spell_is_not_a_broken_engine() {
        let l = streaming();
        full_frame(&l);
        failed_frame(&l, FailedStage::Segment);
        failed_frame(&l, FailedStage::Segment);
        // The camera then sends nothing for a long time.
        let health = l.health(after(60), STALL);
        assert_eq!(health, Health::Idle);
    }

    #[test]
    fn capture_failures_are_not_held_against_the_engine() {
        let l = streaming();
        full_frame(&l);
        for _ in 0..2 {
            l.frame_captured();
            l.frame_finished_uninspected();
            std::thread::sleep(SHORT_STALL + Duration::from_millis(10));
        }
        let health = l.health(Instant::now(), SHORT_STALL);
        assert_eq!(health, Health::Idle);
    }

    #[test]
    fn alive_while_results_move() {
        let l = streaming();
        full_frame(&l);
        l.frame_captured();
        assert_eq!(
            l.health(Instant::now(), STALL),
            Health::Alive { in_flight: 1 }
        );
        assert!(l.health(after(4), STALL).is_alive());
        assert_eq!((l.captured(), l.finished(), l.in_flight()), (2, 1, 1));
    }

    #[test]
    fn stalled_when_frames_in_flight_stop_finishing() {
        let l = streaming();
        full_frame(&l);
        // Two frames reach inference and never come out.
        for _ in 0..2 {
            l.frame_captured();
            l.frame_preprocessed();
        }
        match l.health(after(6), STALL) {
            Health::Stalled {
                stage,
                for_,
                in_flight,
            } => {
                assert_eq!(stage, Stage::Infer);
                assert_eq!(in_flight, 2);
                assert!(for_ > STALL, "{for_:?}");
            }
            other => panic!("expected a stall, got {other:?}"),
        }
        assert!(!l.health(after(6), STALL).is_alive());
    }

    #[test]
    fn stall_hint_names_the_first_stage_that_never_moved() {
        let l = streaming();
        l.frame_captured(); // stuck in preprocess from the very first frame
        assert!(matches!(
            l.health(after(6), STALL),
            Health::Stalled {
                stage: Stage::Preprocess,
                ..
            }
        ));
    }

    #[test]
    fn stall_hint_names_output_when_writing_blocks() {
        let l = streaming();
        full_frame(&l);
        std::thread::sleep(Duration::from_millis(5));
        // A later frame passes inference but output hangs (a blocked disk).
        l.frame_captured();
        l.frame_preprocessed();
        l.frame_inferred();
        assert!(matches!(
            l.health(after(6), STALL),
            Health::Stalled {
                stage: Stage::Output,
                ..
            }
        ));
    }

    #[test]
    fn uninspected_results_are_not_progress() {
        let l = streaming();
        full_frame(&l);
        // overflow=drop with inference hung: one frame stuck, every new one not_inspected.
        l.frame_captured();
        l.frame_preprocessed();
        for _ in 0..50 {
            l.frame_captured();
            l.frame_finished_uninspected();
        }
        assert!(matches!(
            l.health(after(6), STALL),
            Health::Stalled {
                stage: Stage::Infer,
                in_flight: 1,
                ..
            }
        ));
    }

    #[test]
    fn idle_when_nothing_in_flight_and_source_streaming() {
        let l = streaming();
        full_frame(&l);
        assert_eq!(l.health(after(3600), STALL), Health::Idle);
        assert!(Health::Idle.is_alive());
    }

    #[test]
    fn a_frame_after_a_long_idle_spell_gets_a_full_stall_timeout() {
        let l = streaming();
        full_frame(&l);
        std::thread::sleep(Duration::from_millis(30));
        l.frame_captured(); // the first frame in a while, just entered
        let now = Instant::now();
        assert_eq!(
            l.health(now, Duration::from_millis(20)),
            Health::Alive { in_flight: 1 }
        );
    }

    #[test]
    fn source_not_streaming_is_waited_for_one_stall_timeout() {
        let l = Liveness::new(); // not streaming yet: opening the camera
        assert!(matches!(
            l.health(after(1), STALL),
            Health::WaitingForSource { .. }
        ));
        assert!(matches!(
            l.health(after(6), STALL),
            Health::Stalled {
                stage: Stage::Capture,
                in_flight: 0,
                ..
            }
        ));
        // It comes up: idle until frames arrive.
        assert_eq!(l.is_alive(after(6), STALL, true), Health::Idle);
    }

    #[test]
    fn a_lost_source_being_rebuilt_keeps_the_watchdog_pinging() {
        let l = Liveness::new();
        l.set_source_managed(true);
        // Not streaming yet, past the stall timeout: capture is on it.
        assert!(matches!(
            l.health(after(2), Duration::from_secs(1)),
            Health::WaitingForSource { .. }
        ));
        l.set_source_lost(true);
        let health = l.health(after(2), Duration::from_secs(1));
        assert!(
            matches!(health, Health::SourceLost { for_ } if for_ >= Duration::from_secs(1)),
            "{health:?}"
        );
        assert!(
            health.is_alive(),
            "a restart would not bring the camera back"
        );
        assert_eq!(
            status_line(&health, "camera lost since ..."),
            "camera lost since ..."
        );
        // A capture thread that stopped beating (stuck in a driver) is a stall.
        assert!(matches!(
            l.health(after(600), STALL),
            Health::Stalled {
                stage: Stage::Capture,
                ..
            }
        ));
        // Frames still in flight during the outage are held to the stall timeout.
        l.capture_heartbeat();
        l.frame_captured();
        assert!(matches!(
            l.health(after(2), Duration::from_secs(1)),
            Health::Stalled { .. }
        ));
        l.frame_finished();
        l.set_source_lost(false);
        assert!(!l.source_lost());
    }

    #[test]
    fn a_source_loss_restarts_the_clock_once() {
        let stall = Duration::from_millis(20);
        let l = streaming();
        full_frame(&l);
        std::thread::sleep(Duration::from_millis(30));
        // Idle for longer than the stall timeout, then the camera drops: it gets a fresh
        // stall timeout to come back.
        let dropped = Instant::now();
        assert!(matches!(
            l.is_alive(dropped, stall, false),
            Health::WaitingForSource { .. }
        ));
        // Still down: reporting "not streaming" again does not reset the clock.
        std::thread::sleep(Duration::from_millis(30));
        assert!(matches!(
            l.is_alive(Instant::now(), stall, false),
            Health::Stalled {
                stage: Stage::Capture,
                in_flight: 0,
                ..
            }
        ));
    }

    /// One camera (a single `[source]`): a stuck source reads word for word as
    /// it did before cameras could be several.
    #[test]
    fn one_cameras_stuck_source_reads_as_before_several_cameras() {
        let l = streaming();
        l.set_source_name("[source] pipeline filesrc");
        full_frame(&l);
        for _ in 0..3 {
            l.pipeline_abandoned();
        }
        let health = l.health(Instant::now(), STALL);
        assert!(
            matches!(
                health,
                Health::SourceStuck {
                    in_a_row: 3,
                    still_stuck: 3,
                    capture_silent: false,
                    camera: None,
                    ..
                }
            ),
            "{health:?}"
        );
        assert!(!health.is_alive());
        assert_eq!(
            status_line(&health, "29.8 fps"),
            "SOURCE STUCK: the source is stuck: 3 of its pipelines in a row did not stop when it was lost \
             (an element blocked in a read or a driver call; 3 still blocked), watchdog pings stopped; 29.8 fps"
        );
        assert_eq!(
            stuck_source_reason(&health, Some(l.source_name())).unwrap(),
            "the source ([source] pipeline filesrc) is stuck: 3 of its pipelines in a row did not stop \
             when it was lost (an element blocked in a read or a driver call; 3 still blocked)"
        );
    }

    #[test]
    fn another_cameras_abandoned_pipelines_make_its_source_stuck_naming_it() {
        let front = streaming();
        front.set_source_name(FRONT);
        let side = live_camera(&front, SIDE);
        full_frame(&front);
        lost_with_pipelines_abandoned(&side, MAX_ABANDONED_IN_A_ROW);
        // The first camera inspects normally meanwhile.
        full_frame(&front);
        front.capture_heartbeat();
        let now = Instant::now();
        let health = front.health(now, STALL);
        let Health::SourceStuck {
            in_a_row: 3,
            still_stuck: 3,
            capture_silent: false,
            camera: Some(camera),
            ..
        } = &health
        else {
            panic!("{health:?}");
        };
        assert_eq!(&**camera, SIDE);
        assert!(!health.is_alive());
        // The station's verdict, whichever camera's handle asks.
        assert_eq!(side.health(now, STALL), health);
        // The words name the side camera, not the first one the caller gives.
        assert_eq!(
            stuck_source_reason(&health, Some(front.source_name())).unwrap(),
            "the source (camera side: RTSP camera rtsp://side) is stuck: 3 of its pipelines in a row \
             did not stop when it was lost (an element blocked in a read or a driver call; 3 still blocked)"
        );
        assert!(
            status_line(&health, "29.8 fps").starts_with(
                "SOURCE STUCK: the source (camera side: RTSP camera rtsp://side) is stuck: 3 of its"
            ),
            "{}",
            status_line(&health, "29.8 fps")
        );
    }

    #[test]
    fn another_cameras_device_held_by_an_abandoned_pipeline_makes_its_source_stuck() {
        let front = streaming();
        let side = live_camera(&front, SIDE);
        full_frame(&front);
        lost_with_pipelines_abandoned(&side, 1);
        side.rebuild_started(false);
        assert_eq!(
            front.health(after(2), STALL),
            Health::Alive { in_flight: 0 }
        );
        let health = front.health(after(6), STALL);
        assert!(
            matches!(
                &health,
                Health::SourceStuck { in_a_row: 1, still_stuck: 1, capture_silent: false, camera: Some(c), for_ }
                    if &**c == SIDE && *for_ >= STALL
            ),
            "{health:?}"
        );
    }

    #[test]
    fn the_first_camera_in_set_up_order_whose_source_is_stuck_is_named() {
        let front = streaming();
        front.set_source_name(FRONT);
        let side = live_camera(&front, SIDE);
        let top = live_camera(&front, "camera top: RTSP camera rtsp://top");
        lost_with_pipelines_abandoned(&top, 3);
        lost_with_pipelines_abandoned(&side, 4);
        let health = front.health(Instant::now(), STALL);
        assert!(
            matches!(&health, Health::SourceStuck { in_a_row: 4, camera: Some(c), .. } if &**c == SIDE),
            "{health:?}"
        );
        // The first camera's comes first, named by the caller as before.
        lost_with_pipelines_abandoned(&front, 3);
        let health = front.health(Instant::now(), STALL);
        assert!(
            matches!(
                health,
                Health::SourceStuck {
                    in_a_row: 3,
                    camera: None,
                    ..
                }
            ),
            "{health:?}"
        );
        assert!(
            stuck_source_reason(&health, Some(front.source_name()))
                .unwrap()
                .starts_with("the source (camera front: RTSP camera rtsp://front) is stuck")
        );
    }

    #[test]
    fn another_camera_lost_and_being_rebuilt_keeps_the_station_alive() {
        let stall = Duration::from_millis(20);
        let front = streaming();
        let side = live_camera(&front, SIDE);
        full_frame(&front);
        // Lost, two rebuilt pipelines abandoned (below the limit) whose
        // teardowns then ended; capture keeps rebuilding, its thread beating.
        lost_with_pipelines_abandoned(&side, MAX_ABANDONED_IN_A_ROW - 1);
        side.abandoned_teardown_ended();
        side.abandoned_teardown_ended();
        side.rebuild_started(false);
        assert_eq!(
            front.health(after(2), STALL),
            Health::Alive { in_flight: 0 }
        );
        // Down for longer than the stall timeout, thread still beating.
        std::thread::sleep(stall + Duration::from_millis(10));
        side.capture_heartbeat();
        assert!(side.source_lost());
        assert_eq!(front.health(Instant::now(), stall), Health::Idle);
    }

    #[test]
    fn another_cameras_capture_thread_gone_silent_while_its_source_is_down_is_stuck() {
        let front = streaming();
        let side = live_camera(&front, SIDE);
        full_frame(&front);
        // Down, thread beating a moment ago: capture's business.
        assert_eq!(
            front.health(after(2), STALL),
            Health::Alive { in_flight: 0 }
        );
        // No beat for 10 s (the limit: the 5 s stall timeout), down as long.
        let health = front.health(after(10), STALL);
        assert!(
            matches!(
                &health,
                Health::SourceStuck { capture_silent: true, camera: Some(c), for_, .. }
                    if &**c == SIDE && *for_ >= Duration::from_secs(10)
            ),
            "{health:?}"
        );
        assert!(!health.is_alive());
        assert_eq!(
            stuck_source_reason(&health, Some(front.source_name())).unwrap(),
            "the source (camera side: RTSP camera rtsp://side) is stuck: it is down and its capture \
             thread has not looked after it for 10 s (blocked in a driver call, or ended), so nothing \
             rebuilds it"
        );
        // Streaming, its thread silent between beats: frames move.
        side.set_source_streaming(true);
        assert_eq!(front.health(after(60), STALL), Health::Idle);
        // A source capture does not manage (a file at its end) is not judged.
        let file = front.for_another_camera();
        file.set_source_name("camera top: file top.mp4");
        assert_eq!(front.health(after(60), STALL), Health::Idle);
    }

    #[test]
    fn the_first_of_several_cameras_is_judged_on_its_own_source_not_the_stations() {
        let front = Liveness::new();
        front.set_source_name(FRONT);
        front.set_source_managed(true);
        front.set_source_streaming(true);
        let side = live_camera(&front, SIDE);
        side.set_source_streaming(true);
        // The front camera goes down; its capture thread beats (rebuilding).
        front.set_source_streaming(false);
        front.capture_heartbeat();
        full_frame(&side);
        // The watchdog's probe: the station streams (the side camera does).
        assert_eq!(
            front.is_alive(after(2), STALL, true),
            Health::Alive { in_flight: 0 }
        );
        assert!(
            !front.source_streaming(),
            "the probe must not overwrite the front camera's own state"
        );
        // Its thread silent for 10 s while down: stuck, though the station streams.
        let health = front.is_alive(after(10), STALL, true);
        assert!(
            matches!(
                &health,
                Health::SourceStuck { capture_silent: true, camera: None, for_, .. }
                    if *for_ >= Duration::from_secs(10)
            ),
            "{health:?}"
        );
        assert!(
            stuck_source_reason(&health, Some(front.source_name()))
                .unwrap()
                .contains(FRONT)
        );
        // Streaming again: the station is idle between frames, as before.
        front.set_source_streaming(true);
        assert_eq!(front.is_alive(after(60), STALL, true), Health::Idle);
        // The station's state is read from the cameras' own records, not
        // written over them by the probe.
        assert_eq!(front.is_alive(after(60), STALL, false), Health::Idle);
        assert!(front.source_streaming());
    }
}

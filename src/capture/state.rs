//! What the appsink callback, the bus thread and the `Capture` handle share.
//!
//! The ring is single-producer: the appsink callback pushes frames on the
//! GStreamer streaming thread, and the bus thread pushes `End` once streaming
//! has stopped. The producer therefore sits behind a `Mutex` that only these two
//! ever take, and never at the same time while streaming (the bus thread takes
//! it after the pipeline reached NULL or posted EOS, when no callback runs): an
//! uncontended lock, one atomic exchange per frame. The ring itself stays lock-free.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use gstreamer as gst;

use super::error::EndOfStream;
use super::genicam::GenicamLink;
use super::rings::{CaptureEvent, RingProducer};
use super::status::SourceStatus;
use crate::config::{OverflowPolicy, SourceRecovery};
use crate::ring::StopHandle;
use crate::service::Liveness;

#[derive(Debug)]
pub(crate) struct CaptureShared {
    /// The source as named in messages.
    pub(crate) origin: String,
    pub(crate) policy: OverflowPolicy,
    pub(crate) pool_size: usize,
    /// Live sources (camera, RTSP) may be idle without being stalled.
    live: AtomicBool,
    /// `None` once `End` was pushed.
    producer: Mutex<Option<RingProducer>>,
    ring_stop: StopHandle,
    pub(crate) liveness: Liveness,
    /// Frames the source delivered; the next frame's `seq`.
    delivered: AtomicU64,
    /// Origin of `last_frame_ns`.
    epoch: Instant,
    /// Nanoseconds from `epoch` to the last delivered frame, plus one; 0 = none yet.
    last_frame_ns: AtomicU64,
    /// PLAYING and no error.
    streaming: AtomicBool,
    /// The source failed (`End(Error)`).
    failed: AtomicBool,
    /// `End` was pushed.
    ended: AtomicBool,
    /// `stop()` asked for a graceful end.
    pub(crate) stop_requested: AtomicBool,
    /// `shutdown()` / drop: end now.
    pub(crate) shutdown_requested: AtomicBool,
    /// The appsink received EOS: every frame before it has been delivered. This,
    /// not only the pipeline's EOS message, ends the stream: a pipeline does not
    /// post EOS when its sink's EOS races with the PAUSED→PLAYING change (an EOS
    /// sent by `stop()` right after start), and a user pipeline may have other sinks.
    pub(crate) sink_eos: AtomicBool,
    /// Why each GAP buffer on its way to the appsink has no picture, oldest
    /// first (an image-sequence file that could not be decoded, naming it).
    gap_reasons: Mutex<VecDeque<String>>,
    /// How a lost live source is rebuilt; `None`: the source is finite and its
    /// end, or its error, ends the stream.
    pub(crate) recovery: Option<SourceRecovery>,
    /// Up or lost, outages and tries: for STATUS=, metrics and the status page.
    pub(crate) status: SourceStatus,
    /// Frame interval of the negotiated caps in nanoseconds; 0 = unknown.
    frame_interval_ns: AtomicU64,
    /// The frame size last logged, `width << 32 | height`; 0 = none yet.
    logged_frame_size: AtomicU64,
    /// The pipeline now running, if any: a live source's is replaced on every
    /// rebuild; `stop()` wakes its bus and a last `shutdown` sets it to NULL.
    pipeline: Mutex<Option<gst::Pipeline>>,
    /// Which pipeline's callbacks may still deliver: each pipeline's callbacks
    /// carry the generation they were made in, and a teardown moves it on
    /// (`retire_pipeline`), so an abandoned pipeline whose blocked element
    /// wakes up later delivers nothing into the next pipeline's stream.
    generation: AtomicU64,
    /// A `kind = "genicam"` source's camera and frame counts.
    pub(crate) genicam: Option<Arc<GenicamLink>>,
}

impl CaptureShared {
    pub(crate) fn new(
        origin: String,
        policy: OverflowPolicy,
        pool_size: usize,
        live: bool,
        producer: RingProducer,
        liveness: Liveness,
    ) -> Self {
        CaptureShared {
            origin,
            policy,
            pool_size,
            live: AtomicBool::new(live),
            ring_stop: producer.stop_handle(),
            producer: Mutex::new(Some(producer)),
            status: SourceStatus::new(&liveness),
            liveness,
            delivered: AtomicU64::new(0),
            epoch: Instant::now(),
            last_frame_ns: AtomicU64::new(0),
            streaming: AtomicBool::new(false),
            failed: AtomicBool::new(false),
            ended: AtomicBool::new(false),
            stop_requested: AtomicBool::new(false),
            shutdown_requested: AtomicBool::new(false),
            sink_eos: AtomicBool::new(false),
            gap_reasons: Mutex::new(VecDeque::new()),
            recovery: None,
            frame_interval_ns: AtomicU64::new(0),
            logged_frame_size: AtomicU64::new(0),
            pipeline: Mutex::new(None),
            generation: AtomicU64::new(0),
            genicam: None,
        }
    }

    /// The generation a new pipeline's callbacks belong to.
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The pipeline being torn down may deliver no more: its callbacks' frames
    /// and end-of-stream are ignored from now on. Moved on under the producer
    /// lock, so a callback that checked its generation has finished its push.
    pub(crate) fn retire_pipeline(&self) {
        let _producer = self.producer();
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// Whether callbacks made in `generation` may still deliver.
    pub(crate) fn is_current(&self, generation: u64) -> bool {
        self.generation() == generation
    }

    /// The pipeline now running (a clone of the handle), if any.
    pub(crate) fn pipeline(&self) -> Option<gst::Pipeline> {
        self.pipeline
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub(crate) fn set_pipeline(&self, pipeline: Option<gst::Pipeline>) {
        *self.pipeline.lock().unwrap_or_else(PoisonError::into_inner) = pipeline;
    }

    /// Records the frame rate of the negotiated caps (`fps` of 0 = variable).
    pub(crate) fn note_frame_rate(&self, numerator: i32, denominator: i32) {
        let interval = if numerator > 0 && denominator > 0 {
            (1_000_000_000u64 * denominator as u64) / numerator as u64
        } else {
            0
        };
        self.frame_interval_ns.store(interval, Ordering::Relaxed);
    }

    /// Records the frame size of the stream; true when it differs from the
    /// last one recorded (worth a log line), false for the same size again.
    pub(crate) fn note_frame_size(&self, (width, height): (u32, u32)) -> bool {
        let packed = (u64::from(width) << 32) | u64::from(height);
        self.logged_frame_size.swap(packed, Ordering::Relaxed) != packed
    }

    /// The negotiated frame interval, if the caps name a fixed rate.
    pub(crate) fn frame_interval(&self) -> Option<Duration> {
        match self.frame_interval_ns.load(Ordering::Relaxed) {
            0 => None,
            ns => Some(Duration::from_nanos(ns)),
        }
    }

    /// After a lost pipeline went to NULL: the ring may wait for slots again and
    /// the next pipeline's EOS is its own. Frames and `seq` go on.
    pub(crate) fn ready_for_rebuild(&self) {
        self.ring_stop.clear_stop();
        self.sink_eos.store(false, Ordering::Release);
        self.frame_interval_ns.store(0, Ordering::Relaxed);
        self.flush_pending_drops();
    }

    /// Whether `End` may be pushed now rather than rebuilding (a stop or
    /// shutdown was asked for).
    pub(crate) fn ending(&self) -> bool {
        self.stop_requested.load(Ordering::Acquire)
            || self.shutdown_requested.load(Ordering::Acquire)
    }

    /// Records why the next GAP buffer pushed into the pipeline has no picture.
    pub(crate) fn note_gap_reason(&self, reason: String) {
        self.gap_reasons
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push_back(reason);
    }

    /// Why the GAP buffer that just reached the appsink has no picture.
    pub(crate) fn take_gap_reason(&self) -> String {
        self.gap_reasons
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop_front()
            .unwrap_or_else(|| {
                "the source delivered a frame without a picture (a GAP buffer)".to_string()
            })
    }

    /// The producer, if the stream has not ended. A panic elsewhere while it was
    /// held does not leave the ring unusable: the ring's state is consistent
    /// between calls, so the poison is ignored.
    pub(crate) fn producer(&self) -> MutexGuard<'_, Option<RingProducer>> {
        self.producer.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A live source (camera, RTSP, or a pipeline that does not preroll): its
    /// frames exist when they arrive, whether or not a slot is free.
    pub(crate) fn is_live(&self) -> bool {
        self.live.load(Ordering::Relaxed)
    }

    pub(crate) fn set_live(&self) {
        self.live.store(true, Ordering::Relaxed);
    }

    /// Reports a pending run of dropped frames now rather than with the next
    /// frame (which may not come soon from an idle camera). Skipped when the
    /// streaming thread holds the producer: it flushes by itself.
    pub(crate) fn flush_pending_drops(&self) {
        let mut guard = match self.producer.try_lock() {
            Ok(guard) => guard,
            Err(std::sync::TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return,
        };
        if let Some(producer) = guard.as_mut() {
            producer.flush_pending_drops();
        }
    }

    /// Counts a delivered frame and returns its sequence number.
    pub(crate) fn next_seq(&self, at: Instant) -> u64 {
        let since = u64::try_from(at.saturating_duration_since(self.epoch).as_nanos())
            .unwrap_or(u64::MAX - 1);
        self.last_frame_ns.store(since + 1, Ordering::Relaxed);
        self.liveness.frame_captured();
        if !self.status.is_up() {
            self.source_back();
        }
        // Frames moving means streaming, even before the pipeline reports PLAYING
        // (a fast source can deliver while the state change is still completing).
        if !self.streaming.load(Ordering::Relaxed) {
            self.set_streaming(true);
        }
        self.delivered.fetch_add(1, Ordering::Relaxed)
    }

    pub(crate) fn set_streaming(&self, streaming: bool) {
        if self.ended.load(Ordering::Acquire) {
            return;
        }
        self.streaming.store(streaming, Ordering::Release);
        self.liveness.set_source_streaming(streaming);
    }

    /// Wakes the streaming thread if it waits for a slot, so the pipeline can stop.
    pub(crate) fn abort_waits(&self) {
        self.ring_stop.request_stop();
    }

    /// Pushes `End` (after any pending drops) once; later calls do nothing.
    /// Call only when no appsink callback can run any more.
    pub(crate) fn end(&self, end: EndOfStream) {
        let Some(mut producer) = self.producer().take() else {
            return;
        };
        self.streaming.store(false, Ordering::Release);
        self.liveness.set_source_streaming(false);
        // A capture ended on purpose (stopped, or the stream's own end) has
        // nothing left to rebuild: its silent thread is no stuck camera. One
        // that failed stays managed, so a camera left without a capture is
        // reported (`Health::SourceStuck`).
        if !matches!(end, EndOfStream::Error(_)) {
            self.liveness.set_source_managed(false);
        }
        match &end {
            EndOfStream::Error(e) => {
                self.failed.store(true, Ordering::Release);
                log::error!(target: "sealcheck::capture", source = self.origin.as_str(), error = e.to_string().as_str(); "capture failed");
            }
            EndOfStream::Finished => {
                log::info!(target: "sealcheck::capture", source = self.origin.as_str(), frames = self.frames_delivered(); "end of stream")
            }
            EndOfStream::Stopped => {
                log::info!(target: "sealcheck::capture", source = self.origin.as_str(), frames = self.frames_delivered(); "capture stopped")
            }
        }
        if let Some(link) = &self.genicam {
            link.set_camera(None);
            link.log_counts("at the end of capture");
        }
        producer.push(CaptureEvent::End(end));
        self.ended.store(true, Ordering::Release);
    }

    pub(crate) fn frames_delivered(&self) -> u64 {
        self.delivered.load(Ordering::Relaxed)
    }

    /// The first frame after an outage: the outage ends here, logged once with
    /// how long it lasted and how many rebuilds it took.
    fn source_back(&self) {
        if let Some(ended) = self.status.back() {
            self.liveness.set_source_lost(false);
            log::info!(target: "sealcheck::capture", source = self.origin.as_str(),
                outage_s = ended.lasted.as_secs_f64(), tries = ended.tries,
                outages = self.status.outages(), next_seq = self.frames_delivered();
                "source is back after {:.1} s and {} tr{}; inspection resumes",
                ended.lasted.as_secs_f64(), ended.tries, if ended.tries == 1 { "y" } else { "ies" });
        }
    }

    pub(crate) fn is_streaming(&self) -> bool {
        self.streaming.load(Ordering::Acquire)
    }

    pub(crate) fn has_ended(&self) -> bool {
        self.ended.load(Ordering::Acquire)
    }

    pub(crate) fn last_frame_at(&self) -> Option<Instant> {
        match self.last_frame_ns.load(Ordering::Relaxed) {
            0 => None,
            ns => Some(self.epoch + Duration::from_nanos(ns - 1)),
        }
    }
}

/// A cheap, cloneable view of capture's state for the watchdog thread.
#[derive(Debug, Clone)]
pub struct CaptureProbe {
    pub(crate) shared: Arc<CaptureShared>,
}

impl CaptureProbe {
    /// Frames the source delivered so far (inspected, dropped and failed alike).
    pub fn frames_delivered(&self) -> u64 {
        self.shared.frames_delivered()
    }

    /// The pipeline is PLAYING and has reported no error.
    pub fn is_streaming(&self) -> bool {
        self.shared.is_streaming()
    }

    /// When the source last delivered a frame.
    pub fn last_frame_at(&self) -> Option<Instant> {
        self.shared.last_frame_at()
    }

    /// `End` was pushed: the source finished, was stopped, or failed.
    pub fn has_ended(&self) -> bool {
        self.shared.has_ended()
    }

    /// The source ended with an error.
    pub fn has_failed(&self) -> bool {
        self.shared.failed.load(Ordering::Acquire)
    }

    /// Whether capture looks healthy at `now`: a frame arrived within
    /// `stall_timeout`, or a live source is PLAYING without error (a camera may
    /// legitimately be idle), or the stream ended without error.
    pub fn is_healthy(&self, now: Instant, stall_timeout: Duration) -> bool {
        if self.has_failed() {
            return false;
        }
        if self.has_ended() {
            return true;
        }
        let recent = self
            .last_frame_at()
            .is_some_and(|t| now.saturating_duration_since(t) <= stall_timeout);
        recent || (self.shared.is_live() && self.is_streaming())
    }
}

//! A source that replays frames held in memory, for `sealcheck bench`: the
//! figures are then the pipeline's, not the decoder's or the camera's.
//!
//! `load_frames` decodes the configured source once through the real capture
//! path; `Replay` feeds copies of them into the frame ring: the warm-up as
//! fast as the pipeline takes it, then the measured frames either the same way
//! (backpressure, never drops) or paced like a camera (stamped at their due
//! time, dropped when no slot is free then).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use super::camera::Capture;
use super::error::{CaptureError, EndOfStream};
use super::rings::{CaptureEvent, RingProducer};
use crate::config::{OverflowPolicy, SourceConfig};
use crate::frame::{FrameMeta, FrameSlot};
use crate::ring;
use crate::service::Liveness;
use crate::stats::LatencyHistogram;

/// A paced replay's rate (frames per second) and where the lateness of its
/// offers goes (shared by every camera's replay).
pub type Pacing = (f64, Arc<Mutex<LatencyHistogram>>);

/// Decodes up to `max` frames of `source` into memory.
pub fn load_frames(source: &SourceConfig, max: usize) -> Result<Vec<FrameSlot>, CaptureError> {
    let config = SourceConfig {
        overflow: OverflowPolicy::Block,
        ..source.clone()
    };
    let (producer, mut consumer) = ring::frame_ring(config.pool_size);
    let capture = Capture::start(&config, producer, Liveness::new())?;
    let mut frames = Vec::new();
    while frames.len() < max {
        match consumer.pop(Duration::from_millis(200)) {
            Some(CaptureEvent::Frame(slot)) => {
                frames.push(FrameSlot {
                    meta: slot.meta,
                    width: slot.width,
                    height: slot.height,
                    stride: slot.stride,
                    layout: slot.layout,
                    data: slot.data.clone(),
                    in_slot: slot.in_slot,
                });
                consumer.recycle(slot);
            }
            Some(CaptureEvent::End(EndOfStream::Error(e))) => return Err(e),
            Some(CaptureEvent::End(_)) => break,
            Some(_) | None => {}
        }
        // A live source is waited for while it is lost: a benchmark does not wait.
        let status = capture.source_status();
        if !status.is_up() {
            capture.shutdown();
            return Err(CaptureError::Start {
                origin: super::launch::describe(&source.kind),
                verb: super::launch::start_verb(&source.kind),
                reason: format!(
                    "the source was lost while frames were being loaded: {}",
                    status.last_error()
                ),
                hint: super::launch::hint(&source.kind),
            });
        }
    }
    capture.shutdown();
    Ok(frames)
}

/// Replays `frames` round-robin until `count` frames were offered or stop.
///
/// The first `warmup` frames go in as fast as the pipeline takes them
/// (backpressure). The measured frames start once every warm-up result is
/// written, so none of them waits behind a warm-up frame. Without a `rate`
/// they too go in as fast as the pipeline takes them, each stamped when it
/// gets its slot. With a `rate` they come as a camera's do: measured frame `k`
/// is due `k / rate` seconds after the paced clock started and is stamped with
/// its due time (a frame exists from its exposure, so any wait counts as
/// latency); when no slot is free at its due time it is dropped, exactly as
/// capture's `overflow = "drop"` drops (a `Dropped` event in the ring, a
/// `not_inspected` result), so the pipeline can never take frames faster than
/// they are offered. How late the replay thread itself offers each paced
/// frame after its due time (its sleep's wake-up) is recorded apart, so a
/// report can tell that share of the latency from the pipeline's.
pub struct Replay {
    thread: Option<JoinHandle<()>>,
    delivered: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    stop_handle: ring::StopHandle,
}

/// Longest single sleep while waiting for a due time, so a stop is seen promptly.
const SLEEP_SLICE: Duration = Duration::from_millis(50);

/// The camera's clock of a paced replay: when measured frame 0 was due, in both clocks.
#[derive(Clone, Copy)]
struct PacedClock {
    instant: Instant,
    wall: SystemTime,
    rate: f64,
}

impl PacedClock {
    fn start(rate: f64) -> PacedClock {
        PacedClock {
            instant: Instant::now(),
            wall: SystemTime::now(),
            rate,
        }
    }

    /// The capture stamp of measured frame `k` (due `k / rate` after the start).
    fn due(&self, seq: u64, k: u64) -> FrameMeta {
        let after = Duration::from_secs_f64(k as f64 / self.rate);
        FrameMeta {
            seq,
            camera: 0,
            captured_at: self.wall + after,
            captured_instant: self.instant + after,
            part: crate::frame::Part::free(seq),
        }
    }
}

/// What the replay thread owns.
struct Feeder {
    frames: Arc<Vec<FrameSlot>>,
    producer: RingProducer,
    liveness: Liveness,
    delivered: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
}

impl Feeder {
    /// `warmup_results`: results written (by every camera replayed) before
    /// the measured frames start.
    fn run(mut self, count: u64, warmup: u64, warmup_results: u64, pacing: Option<Pacing>) {
        self.liveness.set_source_streaming(true);
        let mut clock: Option<PacedClock> = None;
        for seq in 0..count {
            if self.stopped() || self.frames.is_empty() {
                break;
            }
            if seq == warmup && seq > 0 && !self.wait_for_results(warmup_results) {
                break;
            }
            match &pacing {
                Some((rate, lateness)) if seq >= warmup => {
                    let meta = clock
                        .get_or_insert_with(|| PacedClock::start(*rate))
                        .due(seq, seq - warmup);
                    if !self.sleep_until(meta.captured_instant) {
                        break;
                    }
                    let late = meta.captured_instant.elapsed().as_secs_f64() * 1e3;
                    lateness
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .record(late);
                    self.offer_or_drop(meta);
                }
                _ => {
                    if !self.offer_waiting(seq) {
                        break;
                    }
                }
            }
        }
        let end = if self.stopped() {
            EndOfStream::Stopped
        } else {
            EndOfStream::Finished
        };
        self.producer.push(CaptureEvent::End(end));
        self.liveness.set_source_streaming(false);
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    /// Waits for a free slot (backpressure) and stamps the frame as it gets
    /// it; false when none will come (stop, or the pipeline is gone).
    fn offer_waiting(&mut self, seq: u64) -> bool {
        let Some(slot) = self.producer.acquire_slot(OverflowPolicy::Block) else {
            return false;
        };
        self.deliver(slot, FrameMeta::now(seq));
        true
    }

    /// A camera's frame at its due time: into a free slot, or dropped.
    fn offer_or_drop(&mut self, meta: FrameMeta) {
        match self.producer.acquire_slot(OverflowPolicy::Drop) {
            Some(slot) => self.deliver(slot, meta),
            None => {
                self.liveness.frame_captured();
                self.delivered.fetch_add(1, Ordering::Release);
                self.producer.push(CaptureEvent::Dropped { meta, count: 1 });
            }
        }
    }

    fn deliver(&mut self, mut slot: Box<FrameSlot>, meta: FrameMeta) {
        let frame = &self.frames[(meta.seq % self.frames.len() as u64) as usize];
        slot.data.clear();
        slot.data.extend_from_slice(&frame.data);
        slot.width = frame.width;
        slot.height = frame.height;
        slot.stride = frame.stride;
        slot.layout = frame.layout;
        slot.meta = meta;
        self.liveness.frame_captured();
        self.delivered.fetch_add(1, Ordering::Release);
        self.producer.push(CaptureEvent::Frame(slot));
    }

    /// Waits until the results of the first `frames` frames are written; false
    /// when the run stops (or the pipeline is gone) first.
    fn wait_for_results(&self, frames: u64) -> bool {
        while self.liveness.finished() < frames {
            if self.stopped() || !self.producer.consumer_alive() {
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        true
    }

    /// Sleeps until `due`; false when the run stops first.
    fn sleep_until(&self, due: Instant) -> bool {
        loop {
            if self.stopped() {
                return false;
            }
            let left = due.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return true;
            }
            std::thread::sleep(left.min(SLEEP_SLICE));
        }
    }
}

impl Replay {
    /// Replays `frames` round-robin, `count` in all, the first `warmup` of
    /// them as fast as the pipeline takes them; the rest start once
    /// `warmup` results of each of `cameras` replays are written.
    pub fn start(
        frames: Arc<Vec<FrameSlot>>,
        (count, warmup, cameras): (u64, u64, u64),
        pacing: Option<Pacing>,
        producer: RingProducer,
        liveness: Liveness,
    ) -> std::io::Result<Replay> {
        let delivered = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let stop_handle = producer.stop_handle();
        let feeder = Feeder {
            frames,
            producer,
            liveness,
            delivered: Arc::clone(&delivered),
            stop: Arc::clone(&stop),
        };
        let thread = std::thread::Builder::new()
            .name("replay".into())
            .spawn(move || feeder.run(count, warmup, warmup * cameras.max(1), pacing))?;
        Ok(Replay {
            thread: Some(thread),
            delivered,
            stop,
            stop_handle,
        })
    }

    pub fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        self.stop_handle.request_stop();
    }

    pub fn frames_delivered(&self) -> u64 {
        self.delivered.load(Ordering::Acquire)
    }

    pub fn is_streaming(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }

    pub fn shutdown(mut self) {
        self.stop();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

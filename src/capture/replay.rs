//! A source that replays frames held in memory, for `sealcheck bench`: the
//! figures are then the pipeline's, not the decoder's or the camera's.
//!
//! `load_frames` decodes the configured source once through the real capture
//! path; `Replay` feeds copies of them into the frame ring as fast as the
//! pipeline takes them (backpressure, never drops).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use super::{Capture, CaptureError};
use super::{CaptureEvent, EndOfStream, RingProducer};
use crate::config::{OverflowPolicy, SourceConfig};
use crate::frame::{FrameMeta, FrameSlot};
use crate::ring;
use crate::service::Liveness;

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

/// Replays `frames` round-robin until `count` frames were delivered or stop;
/// with a `rate`, frame `n` is delivered no earlier than `n / rate` seconds
/// after the start, as a camera would.
pub struct Replay {
    thread: Option<JoinHandle<()>>,
    delivered: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    stop_handle: ring::StopHandle,
}

impl Replay {
    pub fn start(
        frames: Arc<Vec<FrameSlot>>,
        count: u64,
        rate: Option<f64>,
        mut producer: RingProducer,
        liveness: Liveness,
    ) -> std::io::Result<Replay> {
        let delivered = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let stop_handle = producer.stop_handle();
        let thread = {
            let (delivered, stop) = (Arc::clone(&delivered), Arc::clone(&stop));
            std::thread::Builder::new()
                .name("replay".into())
                .spawn(move || {
                    liveness.set_source_streaming(true);
                    let started = std::time::Instant::now();
                    for seq in 0..count {
                        if let Some(rate) = rate {
                            let due = started + Duration::from_secs_f64(seq as f64 / rate);
                            std::thread::sleep(
                                due.saturating_duration_since(std::time::Instant::now()),
                            );
                        }
                        if stop.load(Ordering::Acquire) || frames.is_empty() {
                            break;
                        }
                        let Some(mut slot) = producer.acquire_slot(OverflowPolicy::Block) else {
                            break;
                        };
                        let frame = &frames[(seq % frames.len() as u64) as usize];
                        slot.data.clear();
                        slot.data.extend_from_slice(&frame.data);
                        slot.width = frame.width;
                        slot.height = frame.height;
                        slot.stride = frame.stride;
                        slot.layout = frame.layout;
                        slot.meta = FrameMeta::now(seq);
                        liveness.frame_captured();
                        delivered.fetch_add(1, Ordering::Release);
                        producer.push(CaptureEvent::Frame(slot));
                    }
                    let end = if stop.load(Ordering::Acquire) {
                        EndOfStream::Stopped
                    } else {
                        EndOfStream::Finished
                    };
                    producer.push(CaptureEvent::End(end));
                    liveness.set_source_streaming(false);
                })?
        };
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

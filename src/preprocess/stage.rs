//! The preprocess thread: takes frames off the capture ring, fills a work
//! record's tensors, gives the frame slot straight back to capture, and passes
//! the work record on to inference.

use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};

use super::device::FramePreprocessor;
use crate::capture::EndOfStream;
use crate::frame::{FailedStage, FrameSlot, FrameWork, StageMessage};
use crate::ring::Popped;
use crate::trigger::PartRings;

/// Fills `work`'s segmentation input and the RGB channels of its classifier
/// input from `frame`. A failure marks the frame (it will fail with `error`).
pub fn preprocess_frame(
    preprocessor: &mut FramePreprocessor,
    frame: &FrameSlot,
    work: &mut FrameWork,
) {
    let started = Instant::now();
    work.reset(frame.meta);
    if let Err(e) =
        preprocessor.frame_to_tensors(frame.image(), &mut work.seg_input, &mut work.cls_input)
    {
        work.error = Some((FailedStage::Preprocess, e.to_string()));
    }
    work.timings.preprocess_ms = started.elapsed().as_secs_f64() * 1e3;
}

pub struct PreprocessStage {
    pub input: PartRings,
    pub output: Sender<StageMessage>,
    /// Work records come back here from the output stage; waiting on this is
    /// the backpressure that keeps at most `pool` frames in flight.
    pub free_work: Receiver<Box<FrameWork>>,
    pub preprocessor: FramePreprocessor,
    pub liveness: crate::service::Liveness,
    /// Whether to keep the frame's pixels in its work record (archive, live view).
    pub pixel_demand: std::sync::Arc<crate::frame::PixelDemand>,
}

impl PreprocessStage {
    /// Runs until capture ends; returns how it ended.
    pub fn run(mut self) -> EndOfStream {
        loop {
            let Some(event) = self.input.pop(Duration::from_millis(200)) else {
                continue;
            };
            let message = match event {
                Popped::Frame(slot) => {
                    let Ok(mut work) = self.free_work.recv() else {
                        // The output stage is gone: nothing downstream can take more frames.
                        return EndOfStream::Stopped;
                    };
                    preprocess_frame(&mut self.preprocessor, &slot, &mut work);
                    if self.pixel_demand.wanted() {
                        work.pixels.copy_from(&slot);
                    }
                    self.input.recycle(slot);
                    self.liveness.frame_preprocessed();
                    StageMessage::Inspect(work)
                }
                Popped::Marker(message) => message,
                Popped::End(end) => {
                    let _ = self.output.send(StageMessage::End);
                    return end;
                }
            };
            if self.output.send(message).is_err() {
                return EndOfStream::Stopped;
            }
        }
    }
}

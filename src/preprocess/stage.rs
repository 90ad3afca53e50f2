//! The preprocess thread: takes frames off the capture ring, fills a work
//! record's tensors, gives the frame slot straight back to capture, and passes
//! the work record on to inference.
//!
//! A camera with a cavity layout (`[source.layout]`) gives one work record
//! per judged cavity of each frame, its crop (`cavities::CycleCrops`), one
//! after another; the output stage gathers them back into the cycle.

use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};

use super::cavities::{CycleCrops, CycleFit};
use super::device::FramePreprocessor;
use crate::capture::EndOfStream;
use crate::frame::{FailedStage, FrameSlot, FrameWork, ImageView, StageMessage};
use crate::ring::Popped;
use crate::trigger::PartRings;

/// Fills `work`'s segmentation input and the RGB channels of its classifier
/// input from `frame`. A failure marks the frame (it will fail with `error`).
pub fn preprocess_frame(
    preprocessor: &mut FramePreprocessor,
    frame: &FrameSlot,
    work: &mut FrameWork,
) {
    work.reset(frame.meta);
    preprocess_view(preprocessor, frame.image(), work);
}

/// `work` reset for `meta`, its tensors filled from `image` (a frame, or a
/// cavity's crop of one).
pub fn preprocess_image(
    preprocessor: &mut FramePreprocessor,
    meta: crate::frame::FrameMeta,
    image: ImageView<'_>,
    work: &mut FrameWork,
) {
    work.reset(meta);
    preprocess_view(preprocessor, image, work);
}

/// Fills `work`'s tensors from `image` (a frame or a cavity's crop of it),
/// timing it; a failure marks the record.
pub(super) fn preprocess_view(
    preprocessor: &mut FramePreprocessor,
    image: ImageView<'_>,
    work: &mut FrameWork,
) {
    let started = Instant::now();
    if let Err(e) = preprocessor.frame_to_tensors(image, &mut work.seg_input, &mut work.cls_input) {
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
    /// Each camera's cavity layout, by `FrameMeta::camera`.
    pub crops: CycleCrops,
}

impl PreprocessStage {
    /// Runs until capture ends; returns how it ended.
    pub fn run(mut self) -> EndOfStream {
        loop {
            let Some(event) = self.input.pop(Duration::from_millis(200)) else {
                continue;
            };
            let message = match event {
                Popped::Frame(slot) if self.crops.has_layout(slot.meta.camera) => {
                    if self.send_cavities(&slot).is_err() {
                        return EndOfStream::Stopped;
                    }
                    self.input.recycle(slot);
                    self.liveness.frame_preprocessed();
                    continue;
                }
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

    /// One work record per judged cavity of `slot`'s frame, each its crop,
    /// sent on as it is made. A frame the layout does not fit fails every
    /// cavity with `error`, naming the cavity and the sizes. `Err`: the
    /// output or the infer stage is gone.
    fn send_cavities(&mut self, slot: &FrameSlot) -> Result<(), ()> {
        let image = slot.image();
        let fit = self.crops.fit(slot.meta.camera, image.width, image.height);
        let layout = fit.layout();
        let of = layout.enabled_count();
        for (index, number) in layout.enabled().enumerate() {
            let mut work = self.free_work.recv().map_err(|_| ())?;
            work.reset(slot.meta);
            work.cavity = Some(crate::frame::CavityTag {
                number,
                index: index as u16,
                of,
            });
            match &fit {
                CycleFit::Fits(layout) => {
                    let r = layout.crop(number, (image.width as u32, image.height as u32));
                    match image.crop(
                        r.x as usize,
                        r.y as usize,
                        r.width as usize,
                        r.height as usize,
                    ) {
                        Some(crop) => preprocess_view(&mut self.preprocessor, crop, &mut work),
                        None => {
                            work.error = Some((
                                FailedStage::Preprocess,
                                format!("cavity {number}'s crop {r} leaves the frame"),
                            ))
                        }
                    }
                }
                CycleFit::Misfit { message, .. } => {
                    work.error = Some((FailedStage::Preprocess, message.clone()));
                }
            }
            // The archive and the live view see the cycle's frame once.
            if index == 0 && self.pixel_demand.wanted() {
                work.pixels.copy_from(slot);
            }
            self.output
                .send(StageMessage::Inspect(work))
                .map_err(|_| ())?;
        }
        Ok(())
    }
}

//! The device thread's start, in order: open the path (each model once, so
//! the stream, buffers and engines belong to this thread), give the ring
//! slots their page-locked memory (`slots`), warm the path up on frames of
//! the source's size (`warm_up_path`), report to the pipeline (`StartWait`),
//! then judge frames until capture ends (`batches`).
//!
//! ```text
//! pipeline::stages: let (body, started) = stage.thread(..); spawn("device", body); started.wait(..)
//!   device thread: open_path -> slots -> warm_up_path -> report -> DeviceStage::run
//! ```

use std::time::Instant;

use crossbeam_channel::{Receiver, Sender, bounded};

use super::slots::give_slots_page_locked_memory;
use super::{DevicePlan, DeviceStage, open_path};
use crate::capture::EndOfStream;
use crate::config::Config;
use crate::frame::{FrameWork, ImageView, TensorGeometry};
use crate::frame_bytes::HostPlacement;
use crate::infer::backend::BackendKind;
use crate::infer::batch::BatchPolicy;
use crate::infer::device_error::DeviceFrameError;
use crate::infer::device_path::{DeviceFramePath, DeviceModelsOpener, FramePart, PathInfo};
use crate::infer::warm_up::warm_up_sizes;
use crate::infer::warm_up::{WarmUpFrame, WarmUpSize};
use crate::preprocess::CycleCrops;

/// Rounds of the start-up warm-up: each puts as many frames on the stream as
/// may be in flight, then completes them. ONNX Runtime records its CUDA
/// graph only after a few ordinary runs, so one round is not enough.
pub const WARM_UP_ROUNDS: usize = 3;

/// What the device thread reports once its engines are open.
pub struct DeviceStarted {
    pub kind: BackendKind,
    pub geometry: TensorGeometry,
    /// Most frames judged in one batch (1: the models' batch is fixed at one,
    /// or `[inference] max_batch` is 1).
    pub max_batch: usize,
    pub reason: String,
    /// Where new models are opened on reload; `None`: the path cannot swap.
    pub swap_opener: Option<std::sync::Arc<dyn DeviceModelsOpener>>,
}

/// Why the device thread did not start. With `stage` given (an `auto`
/// plan whose GPU engines cannot run here), the caller may go on in host
/// mode with the channels it gets back.
pub struct DeviceStartFailed {
    pub error: DeviceFrameError,
    /// Boxed: the channels are many, and an error travels by value.
    pub stage: Option<Box<DeviceStage>>,
}

/// The device thread's one start report.
type Start = Result<DeviceStarted, (DeviceFrameError, Option<Box<DeviceStage>>)>;

/// Where the pipeline waits for the device thread's start report.
pub struct StartWait(Receiver<Start>);

impl StartWait {
    /// Waits until `thread` (the device thread spawned with the body this
    /// came with) reports: its engines open and warmed up, or why not (it
    /// has ended then, and is joined).
    pub fn wait(
        self,
        thread: std::thread::JoinHandle<EndOfStream>,
    ) -> Result<(std::thread::JoinHandle<EndOfStream>, DeviceStarted), DeviceStartFailed> {
        match self.0.recv() {
            Ok(Ok(started)) => Ok((thread, started)),
            Ok(Err((error, stage))) => {
                let _ = thread.join();
                Err(DeviceStartFailed { error, stage })
            }
            Err(_) => Err(DeviceStartFailed {
                error: DeviceFrameError::StartLost,
                stage: None,
            }),
        }
    }
}

impl DeviceStage {
    /// The device thread's body, for the pipeline to spawn beside the host
    /// threads (`pipeline::stages`), and where to wait for its start
    /// report. The body opens the path, gives the ring slots their memory,
    /// warms the path up on frames of `warm_up` size (`warm_up_path`),
    /// reports the models' geometry or the start error, then runs until
    /// capture ends and returns how it ended.
    pub fn thread(
        self,
        config: &Config,
        plan: DevicePlan,
        warm_up: WarmUpSize,
    ) -> (impl FnOnce() -> EndOfStream + Send + 'static, StartWait) {
        let config = config.clone();
        let (started_tx, started_rx) = bounded::<Start>(1);
        let body = move || self.start_and_run(&config, plan, warm_up, &started_tx);
        (body, StartWait(started_rx))
    }

    fn start_and_run(
        self,
        config: &Config,
        plan: DevicePlan,
        warm_up: WarmUpSize,
        started_tx: &Sender<Start>,
    ) -> EndOfStream {
        // A camera with a cavity layout: each judged cavity is an entry of
        // a batch, and a cycle is judged in one batch, so the path is sized
        // for at least one frame's cavities (as the host path raises its
        // max_batch, `pipeline::stages::batch_policy`).
        let crops = CycleCrops::from_config(config);
        let cavities = crops.most_per_frame();
        let raised;
        let config = if cavities > config.inference.max_batch {
            log::info!(target: "sealcheck::pipeline", max_batch = config.inference.max_batch, cavities = cavities;
                "device path: a cycle's cavities are judged in one batch: max_batch raised to the cavities of one frame");
            let mut more = config.clone();
            more.inference.max_batch = cavities;
            raised = more;
            &raised
        } else {
            config
        };
        let mut opened = match open_path(config, plan) {
            Ok(opened) => opened,
            Err(e) => {
                // `auto` may go on in host mode: hand the channels back.
                let back =
                    (plan == DevicePlan::Auto && e.is_engine_unavailable()).then(|| Box::new(self));
                let _ = started_tx.send(Err((e, back)));
                return EndOfStream::Stopped;
            }
        };
        let frames_in_flight = config.inference.frames_in_flight;
        let kind = opened.info.kind;
        if let Err(error) = cycle_fits(&opened.info, cavities) {
            let _ = started_tx.send(Err((error, None)));
            return EndOfStream::Stopped;
        }
        // Before capture starts (it waits for this thread's start message):
        // every slot's first frame lands in page-locked memory.
        if let Some(allocator) = opened.info.slot_allocator.take() {
            give_slots_page_locked_memory(
                &self.slot_memory,
                allocator,
                config.inference.zero_copy,
                warm_up,
            );
        }
        let started = Instant::now();
        let frame = WarmUpFrame::new(warm_up, &opened.info.geometry);
        let frame = frame.view();
        let depth = opened.info.max_in_flight.min(frames_in_flight).max(1);
        let batching = BatchPolicy {
            max_batch: opened.info.max_batch.min(config.inference.max_batch).max(1),
            wait: config.inference.batch_wait,
        };
        if config.inference.max_batch > 1 && batching.max_batch == 1 {
            log::info!(target: "sealcheck::pipeline", max_batch = config.inference.max_batch;
                "the models have a batch dimension of 1: frames are judged one after another (export them with a dynamic batch to judge frames ready at once in one run)");
        }
        let mut work = FrameWork::new(&opened.info.geometry);
        let host_mask = self.pixel_demand.wanted();
        let sizes = (depth, batching.max_batch);
        let path = opened.path.as_mut();
        match warm_up_path(path, &opened.info, frame, sizes, host_mask, &mut work) {
            Ok(frames) => {
                log::info!(target: "sealcheck::pipeline", engine = kind.as_str(), path = "device",
                    frames = frames, max_batch = batching.max_batch, width = frame.width, height = frame.height, size_from = warm_up.origin(),
                    ms = started.elapsed().as_secs_f64() * 1e3;
                    "engines warmed up before the start");
            }
            Err(e) => {
                let _ = started_tx.send(Err((e, None)));
                return EndOfStream::Stopped;
            }
        }
        let _ = started_tx.send(Ok(DeviceStarted {
            kind,
            geometry: opened.info.geometry,
            max_batch: batching.max_batch,
            reason: opened.reason,
            swap_opener: opened.info.swap_opener.take(),
        }));
        log::info!(target: "sealcheck::pipeline", backend = kind.as_str();
            "device stage: preprocessing, both models and the mask on one CUDA stream");
        self.run(
            opened.path.as_mut(),
            &opened.info,
            frames_in_flight,
            batching,
            crops,
        )
    }
}

/// Whether a frame of `cavities` judged cavities fits one batch of the
/// path `info` describes; else the refusal that names both.
fn cycle_fits(info: &PathInfo, cavities: usize) -> Result<(), DeviceFrameError> {
    if info.max_batch >= cavities {
        return Ok(());
    }
    Err(DeviceFrameError::CycleTooLarge {
        engine: info.kind.as_str(),
        max_batch: info.max_batch,
        cavities,
    })
}

/// The device path's warm-up before the start: `frame` through `path`
/// exactly as a camera frame goes (upload, frame kernel, both models, mask,
/// copies back), on the stream, tensors and tickets the first camera frame
/// will use, so allocations, the engines' first runs and a CUDA graph's
/// capture are done before it. Nothing is in flight at start, so warming
/// the real buffers is safe (a model swap warms up on buffers of its own,
/// `DeviceCandidate::warm_up`, because frames are in flight then).
/// `host_mask`: also bring the mask back, as the first frames will when
/// the archive or the live view wants them. Each batch size up to
/// `max_batch` (and the path's) is run (an engine sets up each input
/// shape, and ONNX Runtime records a CUDA graph per size, at its first
/// runs). Returns the frames run.
pub fn warm_up_path(
    path: &mut dyn DeviceFramePath,
    info: &PathInfo,
    frame: ImageView<'_>,
    (depth, max_batch): (usize, usize),
    host_mask: bool,
    work: &mut FrameWork,
) -> Result<usize, DeviceFrameError> {
    let engine = info.kind.as_str();
    let failed = |step: &'static str| {
        move |e: DeviceFrameError| DeviceFrameError::WarmUp {
            engine,
            step,
            source: Box::new(e),
        }
    };
    let mut frames = 0;
    for batch in warm_up_sizes(max_batch.min(info.max_batch)) {
        for _ in 0..WARM_UP_ROUNDS {
            for _ in 0..depth {
                for _ in 0..batch {
                    // Heap bytes: copied into staging, nothing held.
                    path.stage(frame, HostPlacement::Pageable, host_mask, FramePart::Whole)
                        .map_err(failed("queue a frame"))?;
                }
                path.launch().map_err(failed("queue a batch"))?;
            }
            for _ in 0..depth * batch {
                path.complete(work).map_err(failed("complete a frame"))?;
            }
            frames += depth * batch;
        }
    }
    Ok(frames)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::fake_path::*;
    use super::*;
    use crate::capture::CaptureEvent;
    use crate::frame::{PixelLayout, StageMessage};

    #[test]
    fn the_start_up_warm_up_fills_every_in_flight_slot_and_leaves_nothing_on_the_gpu() {
        let geometry = TINY;
        let mut path = FakeDevicePath::new(2);
        let mut work = FrameWork::new(&geometry);
        let frame = WarmUpFrame::new(
            WarmUpSize::Source {
                width: 3,
                height: 2,
            },
            &geometry,
        );
        let info = path.describe();
        let frames =
            warm_up_path(&mut path, &info, frame.view(), (2, 1), false, &mut work).unwrap();
        assert_eq!(frames, WARM_UP_ROUNDS * 2);
        assert_eq!(path.most_in_flight, 2, "both tickets were used");
        assert!(path.queued.is_empty(), "a camera frame finds the GPU idle");
        assert_eq!(work.mask_pixels, 128, "the frame was mid-grey");

        // The same path then judges camera frames as before.
        let (mut producer, stage, free_tx, out_rx, _swaps) = stage_over_ring(2, 2);
        let handle = std::thread::spawn(move || run_stage(stage, &mut path, 2, ONE_AT_A_TIME));
        tiny_frame(&mut producer, 0, 7);
        let Ok(StageMessage::Inspect(first)) = out_rx.recv_timeout(Duration::from_secs(10)) else {
            panic!("the first camera frame was not judged");
        };
        assert_eq!((first.meta.seq, first.mask_pixels), (0, 7));
        free_tx.send(first).unwrap();
        producer.push(CaptureEvent::End(EndOfStream::Finished));
        assert!(matches!(
            out_rx.recv_timeout(Duration::from_secs(10)).unwrap(),
            StageMessage::End
        ));
        assert_eq!(handle.join().unwrap(), EndOfStream::Finished);
    }

    #[test]
    fn a_cycle_larger_than_the_paths_batch_is_refused_naming_both() {
        let info = FakeDevicePath::batching(2, 4).describe();
        assert!(cycle_fits(&info, 1).is_ok() && cycle_fits(&info, 4).is_ok());
        let message = cycle_fits(&info, 6).unwrap_err().to_string();
        assert!(
            message.contains("judges 6 cavities per frame")
                && message.contains("max_batch 4 < 6 cavities")
                && message.contains("onnxruntime-cuda"),
            "{message}"
        );
    }

    #[test]
    fn a_device_warm_up_that_fails_names_the_engine_and_the_step() {
        let geometry = TINY;
        let mut work = FrameWork::new(&geometry);
        // The fake fails a frame whose first byte is 0xEE when it completes.
        let failing = [0xEE, 0, 0];
        let frame = ImageView {
            width: 1,
            height: 1,
            stride: 3,
            layout: PixelLayout::Rgb,
            data: &failing,
        };
        let mut path = FakeDevicePath::new(2);
        let info = path.describe();
        let error = warm_up_path(&mut path, &info, frame, (2, 1), false, &mut work).unwrap_err();
        let message = error.to_string();
        assert!(
            matches!(
                error,
                DeviceFrameError::WarmUp {
                    engine: "onnxruntime-cuda",
                    step: "complete a frame",
                    ..
                }
            ),
            "{message}"
        );
        assert!(!error.is_engine_unavailable(), "auto must not hide it");
        assert!(message.contains("a failing frame"), "{message}");
    }
}

//! The device stage: for GPU backends with `preprocess = "cuda"`, one thread
//! owns the CUDA stream and every device buffer and takes each frame from the
//! capture ring to the decision's inputs, replacing the preprocess and infer
//! threads.
//!
//! ```text
//! ring slot --host copy--> pinned staging (slot recycled here)
//!   stream: H2D -> frame kernel -> segmentation -> mask kernel -> classifier
//!           -> D2H: classifier logits + mask pixel count (<= 64 bytes)
//!   host: one wait -> StageMessage::Inspect(work) to the output stage
//! ```
//!
//! The host mask, tensors and segmentation logits of `FrameWork` are not
//! filled: the decision reads only `mask_pixels` and `cls_logits`.

use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender, bounded};

use super::BackendKind;
use crate::config::{ComputeDevice, Config};
use crate::frame::{FailedStage, FrameWork, ImageView, StageMessage, TensorGeometry};
use crate::ring::{CaptureEvent, EndOfStream, RingConsumer};

/// GPU milliseconds of each part of a frame, from CUDA events on the stream.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct GpuTimings {
    /// Frame upload plus the frame kernel.
    pub preprocess_ms: f64,
    /// Segmentation model plus the mask kernel and the count copy.
    pub segment_ms: f64,
    /// Classifier model plus the logits copy.
    pub classify_ms: f64,
}

/// Bytes a frame moves between host and device.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FrameTraffic {
    pub host_to_device: usize,
    pub device_to_host: usize,
}

/// A whole frame on one CUDA stream, frame in, decision inputs out.
/// Implemented by the ONNX Runtime CUDA path and TensorRT's `DevicePath`.
pub trait DeviceFramePath {
    fn kind(&self) -> BackendKind;

    /// Copies `frame` into pinned staging and queues all of its GPU work.
    /// `frame` may be reused as soon as this returns.
    fn submit(&mut self, frame: ImageView<'_>) -> Result<(), DeviceFrameError>;

    /// Waits (once) for the frame submitted last, fills `work.mask_pixels`
    /// and `work.cls_logits`, and returns the GPU time of each part.
    fn complete(&mut self, work: &mut FrameWork) -> Result<GpuTimings, DeviceFrameError>;

    /// Host<->device bytes per frame of `frame`'s size.
    fn traffic(&self, frame: &ImageView<'_>) -> FrameTraffic;

    fn run_frame(
        &mut self,
        frame: ImageView<'_>,
        work: &mut FrameWork,
    ) -> Result<GpuTimings, DeviceFrameError> {
        self.submit(frame)?;
        self.complete(work)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DeviceFrameError {
    #[cfg(feature = "cuda")]
    #[error("GPU device path: cannot {action}: {source}")]
    Gpu {
        action: &'static str,
        #[source]
        source: crate::gpu::GpuError,
    },
    #[error(
        "ONNX Runtime on CUDA: cannot {action} for the {role} model: {message} \
         (check the CUDA provider libraries on LD_LIBRARY_PATH and GPU memory)"
    )]
    Ort {
        role: super::ModelRole,
        action: &'static str,
        message: String,
    },
    #[error(transparent)]
    Open(#[from] super::InferError),
    #[cfg(feature = "tensorrt")]
    #[error(transparent)]
    TensorRt(#[from] super::tensorrt::TrtError),
    #[error(
        "the device stage needs a `cuda` build and backend = \"onnxruntime\" with \
         device = \"cuda\" (or TensorRT); this one has {0}"
    )]
    Unsupported(&'static str),
    #[error("cannot start the device thread: {0}")]
    Spawn(std::io::Error),
    #[error("the device thread ended before reporting whether it started")]
    StartLost,
}

impl DeviceFrameError {
    /// Where a per-frame failure belongs in the result's `error` reason.
    pub fn failed_stage(&self) -> FailedStage {
        match self {
            DeviceFrameError::Ort {
                role: super::ModelRole::Classifier,
                ..
            } => FailedStage::Classify,
            _ => FailedStage::Segment,
        }
    }
}

/// Whether the config and the chosen backend run a frame wholly on the GPU:
/// CUDA preprocessing, a GPU engine, and a build with the kernels.
pub fn runs_on_device(config: &Config, backend: BackendKind) -> bool {
    cfg!(feature = "cuda")
        && config.inference.preprocess == ComputeDevice::Cuda
        && matches!(
            backend,
            BackendKind::OnnxRuntimeCuda | BackendKind::TensorRt
        )
}

/// Opens the device path for `backend` on a fresh stream.
pub fn open_path(
    config: &Config,
    backend: BackendKind,
    geometry: TensorGeometry,
) -> Result<Box<dyn DeviceFramePath>, DeviceFrameError> {
    match backend {
        #[cfg(feature = "cuda")]
        BackendKind::OnnxRuntimeCuda => Ok(Box::new(
            super::onnxruntime_device::OrtDevicePath::open(config, geometry)?,
        )),
        #[cfg(feature = "tensorrt")]
        BackendKind::TensorRt => {
            let gpu_backend = super::tensorrt::TensorRtBackend::open(config)?;
            let transfer = if gpu_backend.gpu().integrated() {
                crate::gpu::FrameTransfer::Mapped
            } else {
                crate::gpu::FrameTransfer::Copy
            };
            Ok(Box::new(super::tensorrt::DevicePath::new(
                config,
                gpu_backend,
                transfer,
            )?))
        }
        other => {
            let _ = (config, geometry);
            Err(DeviceFrameError::Unsupported(other.as_str()))
        }
    }
}

/// The device thread's channels.
pub struct DeviceStage {
    pub input: RingConsumer,
    pub output: Sender<StageMessage>,
    /// Work records back from the output stage (backpressure, as in preprocess).
    pub free_work: Receiver<Box<FrameWork>>,
    pub liveness: crate::service::Liveness,
}

impl DeviceStage {
    /// Starts the device thread: it opens the path (so the stream, buffers
    /// and sessions belong to it) and reports success or the start error
    /// before this returns.
    pub fn spawn(
        self,
        config: &Config,
        backend: BackendKind,
        geometry: TensorGeometry,
    ) -> Result<JoinHandle<EndOfStream>, DeviceFrameError> {
        let config = config.clone();
        let (started_tx, started_rx) = bounded::<Result<(), DeviceFrameError>>(1);
        let handle = std::thread::Builder::new()
            .name("device".to_string())
            .spawn(move || match open_path(&config, backend, geometry) {
                Ok(mut path) => {
                    let _ = started_tx.send(Ok(()));
                    log::info!(target: "sealcheck::pipeline", backend = backend.as_str();
                        "device stage: preprocessing, both models and the mask on one CUDA stream");
                    self.run(path.as_mut())
                }
                Err(e) => {
                    let _ = started_tx.send(Err(e));
                    EndOfStream::Stopped
                }
            })
            .map_err(DeviceFrameError::Spawn)?;
        match started_rx.recv() {
            Ok(Ok(())) => Ok(handle),
            Ok(Err(e)) => {
                let _ = handle.join();
                Err(e)
            }
            Err(_) => Err(DeviceFrameError::StartLost),
        }
    }

    /// Runs until capture ends; returns how it ended.
    pub fn run(mut self, path: &mut dyn DeviceFramePath) -> EndOfStream {
        let mut traffic_logged = false;
        loop {
            let Some(event) = self.input.pop(Duration::from_millis(200)) else {
                continue;
            };
            let message = match event {
                CaptureEvent::Frame(slot) => {
                    let Ok(mut work) = self.free_work.recv() else {
                        return EndOfStream::Stopped;
                    };
                    work.reset(slot.meta);
                    if !traffic_logged {
                        traffic_logged = true;
                        let t = path.traffic(&slot.image());
                        log::info!(target: "sealcheck::pipeline", host_to_device = t.host_to_device,
                            device_to_host = t.device_to_host, width = slot.width, height = slot.height;
                            "device stage: bytes copied per frame");
                    }
                    // The pinned copy is the only host pass over the frame; the
                    // slot goes back to capture as soon as it is made.
                    let submitted = path.submit(slot.image());
                    self.input.recycle(slot);
                    match submitted.and_then(|()| path.complete(&mut work)) {
                        Ok(t) => {
                            work.timings.preprocess_ms = t.preprocess_ms;
                            work.timings.segment_ms = t.segment_ms;
                            work.timings.classify_ms = t.classify_ms;
                        }
                        Err(e) => work.error = Some((e.failed_stage(), e.to_string())),
                    }
                    self.liveness.frame_preprocessed();
                    self.liveness.frame_inferred();
                    StageMessage::Inspect(work)
                }
                CaptureEvent::Dropped { meta, count } => {
                    StageMessage::NotInspected { first: meta, count }
                }
                CaptureEvent::Failed { meta, message } => {
                    StageMessage::CaptureFailed { meta, message }
                }
                CaptureEvent::End(end) => {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::OverflowPolicy;
    use crate::frame::PixelLayout;
    use crate::ring::frame_ring;

    /// Test double: a "GPU" that answers from the frame's first byte, so the
    /// test sees which frame each result came from.
    struct FakeDevicePath {
        last_first_byte: Option<u8>,
    }

    impl DeviceFramePath for FakeDevicePath {
        fn kind(&self) -> BackendKind {
            BackendKind::OnnxRuntimeCuda
        }
        fn submit(&mut self, frame: ImageView<'_>) -> Result<(), DeviceFrameError> {
            self.last_first_byte = frame.data.first().copied();
            Ok(())
        }
        fn complete(&mut self, work: &mut FrameWork) -> Result<GpuTimings, DeviceFrameError> {
            let Some(first) = self.last_first_byte.take() else {
                return Err(DeviceFrameError::Unsupported("nothing submitted"));
            };
            if first == 0xEE {
                return Err(DeviceFrameError::Unsupported("a failing frame"));
            }
            work.mask_pixels = u64::from(first);
            work.cls_logits.fill(f32::from(first));
            Ok(GpuTimings {
                preprocess_ms: 1.0,
                segment_ms: 2.0,
                classify_ms: 3.0,
            })
        }
        fn traffic(&self, frame: &ImageView<'_>) -> FrameTraffic {
            FrameTraffic {
                host_to_device: frame.data.len(),
                device_to_host: 16,
            }
        }
    }

    #[test]
    fn frames_go_through_in_order_with_gpu_timings_and_errors_marked() {
        let geometry = TensorGeometry {
            seg_hw: (4, 4),
            seg_classes: 2,
            cls_hw: (2, 2),
            cls_classes: 2,
        };
        let (mut producer, consumer) = frame_ring(2);
        let (free_tx, free_rx) = bounded(2);
        for _ in 0..2 {
            free_tx.send(Box::new(FrameWork::new(&geometry))).unwrap();
        }
        let (out_tx, out_rx) = bounded(8);
        let stage = DeviceStage {
            input: consumer,
            output: out_tx,
            free_work: free_rx,
            liveness: crate::service::Liveness::new(),
        };
        let handle = std::thread::spawn(move || {
            let mut path = FakeDevicePath {
                last_first_byte: None,
            };
            stage.run(&mut path)
        });
        let mut results = Vec::new();
        for (seq, first) in [(0u64, 7u8), (1, 0xEE), (2, 9)] {
            let mut slot = producer.acquire_slot(OverflowPolicy::Block).unwrap();
            slot.meta.seq = seq;
            slot.width = 2;
            slot.height = 1;
            slot.stride = 6;
            slot.layout = PixelLayout::Rgb;
            slot.data.clear();
            slot.data.extend_from_slice(&[first, 0, 0, 0, 0, 0]);
            producer.push(CaptureEvent::Frame(slot));
            match out_rx.recv().unwrap() {
                StageMessage::Inspect(work) => {
                    results.push((
                        work.meta.seq,
                        work.mask_pixels,
                        work.timings.segment_ms,
                        work.error.is_some(),
                    ));
                    free_tx.send(work).unwrap();
                }
                _ => panic!("expected an inspected frame"),
            }
        }
        producer.push(CaptureEvent::End(EndOfStream::Finished));
        assert!(matches!(out_rx.recv().unwrap(), StageMessage::End));
        assert_eq!(handle.join().unwrap(), EndOfStream::Finished);
        assert_eq!(
            results,
            vec![(0, 7, 2.0, false), (1, 0, 0.0, true), (2, 9, 2.0, false)]
        );
    }

    #[test]
    fn cpu_backends_and_cpu_preprocessing_stay_off_the_device_stage() {
        let mut config = crate::config::load(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config/demo.toml"),
        )
        .unwrap();
        assert!(!runs_on_device(&config, BackendKind::OnnxRuntimeCuda));
        config.inference.preprocess = ComputeDevice::Cuda;
        assert!(!runs_on_device(&config, BackendKind::OnnxRuntimeCpu));
        assert!(!runs_on_device(&config, BackendKind::Tract));
        assert_eq!(
            runs_on_device(&config, BackendKind::OnnxRuntimeCuda),
            cfg!(feature = "cuda")
        );
    }
}

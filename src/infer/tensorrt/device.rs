//! Device mode: a whole frame on the GPU, on one CUDA stream, with one wait
//! at the end. The GPU preprocessor (`crate::gpu`) owns the stream and the
//! tensors between the stages; the engines are pointed at those tensors.
//!
//! ```text
//! stream: [frame upload + frame kernel] -> segmentation engine -> [mask kernels + count copy]
//!         -> classifier engine -> logits copy -> event     (host waits here, once)
//! ```
//!
//! No host copy of the segmentation logits or the mask is made: the decision
//! needs only the mask's pixel count and the classifier logits.

use std::sync::Arc;

use super::error::TrtError;
use super::{ModelRole, TensorRtBackend};
use crate::config::Config;
use crate::frame::{FrameWork, ImageView, TensorGeometry};
use crate::gpu::{Event, FrameTransfer, GpuContext, GpuOptions, GpuPreprocessor, PinnedBuffer};
use crate::infer::InferenceBackend;

/// The TensorRT backend and the GPU preprocessor, wired to one stream.
pub struct DevicePath {
    // Drop order: `Drop` waits for the stream first; then the backend (its
    // engines point into the preprocessor's tensors) before the preprocessor.
    backend: TensorRtBackend,
    preprocessor: GpuPreprocessor,
    cls_logits: PinnedBuffer<f32>,
    /// Timing events: before the frame, after preprocessing, after the mask, at the end.
    events: [Event; 4],
    gpu: Arc<GpuContext>,
}

/// Milliseconds each part of the last frame took on the GPU.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct DeviceTimings {
    pub preprocess_ms: f64,
    /// Segmentation engine plus the mask kernels.
    pub segment_ms: f64,
    /// Classifier engine plus the logits copy.
    pub classify_ms: f64,
}

impl DevicePath {
    /// Builds the GPU preprocessor for `backend`'s models and binds both
    /// engines to its tensors. `frame_transfer`: `Mapped` on a Jetson.
    pub fn new(
        cfg: &Config,
        backend: TensorRtBackend,
        frame_transfer: FrameTransfer,
    ) -> Result<Self, TrtError> {
        let geometry: TensorGeometry =
            crate::infer::geometry(backend.segmentation_io(), backend.classifier_io())?;
        let gpu = Arc::clone(backend.gpu());
        let (seg_in, seg_out) = backend.io_elements(ModelRole::Segmentation);
        let (cls_in, _) = backend.io_elements(ModelRole::Classifier);
        if seg_in != cls_in {
            return Err(TrtError::EngineIo {
                role: ModelRole::Classifier,
                engine: backend.engines()[1].1.to_path_buf(),
                problem: format!(
                    "input is {cls_in:?} but the segmentation input is {seg_in:?}; the GPU preprocessor writes both alike"
                ),
            });
        }
        let options = GpuOptions {
            input_element: seg_in,
            logits_element: seg_out,
            mask_class: cfg.segmentation.mask_class,
            frame_transfer,
            ..GpuOptions::default()
        };
        let preprocessor = GpuPreprocessor::new(
            &gpu,
            cfg.segmentation.normalization,
            cfg.classifier.normalization,
            cfg.classifier.mask_mean,
            cfg.classifier.mask_std,
            geometry,
            options,
        )
        .map_err(TrtError::gpu("set up GPU preprocessing for TensorRT"))?;
        let mut backend = backend;
        let cls_output = backend.own_output(ModelRole::Classifier);
        // SAFETY: the preprocessor's tensors live in `preprocessor`, which this
        // struct owns next to `backend` and drops after it (field order, and
        // `Drop` waits for the stream first); `bind_device` checks lengths and
        // element types against the engines' IO. The classifier's output is
        // the backend's own buffer.
        unsafe {
            backend.bind_device(
                ModelRole::Segmentation,
                preprocessor.seg_input(),
                preprocessor.seg_logits(),
            )?;
            backend.bind_device(ModelRole::Classifier, preprocessor.cls_input(), cls_output)?;
        }
        let cls_logits = PinnedBuffer::new(&gpu, geometry.cls_classes, false)
            .map_err(TrtError::gpu("allocate the pinned classifier logits"))?;
        let event = || Event::new(&gpu, true).map_err(TrtError::gpu("create a timing event"));
        let events = [event()?, event()?, event()?, event()?];
        Ok(DevicePath {
            backend,
            preprocessor,
            cls_logits,
            events,
            gpu,
        })
    }

    pub fn backend(&self) -> &TensorRtBackend {
        &self.backend
    }

    /// Runs one frame: fills `work.mask_pixels` and `work.cls_logits` (the
    /// decision's inputs; the host mask and tensors are not filled) and
    /// returns the GPU time of each part.
    pub fn run_frame(
        &mut self,
        frame: ImageView<'_>,
        work: &mut FrameWork,
    ) -> Result<DeviceTimings, TrtError> {
        self.submit_frame(frame)?;
        self.complete_frame(work)
    }

    /// Stages `frame` in pinned memory and queues all of its GPU work; the
    /// frame may be reused when this returns.
    pub fn submit_frame(&mut self, frame: ImageView<'_>) -> Result<(), TrtError> {
        let stream = self.preprocessor.stream();
        let raw = stream.raw() as usize;
        let [begin, preprocessed, masked, done] = &mut self.events;
        begin
            .record(stream)
            .map_err(TrtError::gpu("record an event"))?;
        self.preprocessor
            .enqueue_frame(frame)
            .map_err(TrtError::gpu("queue the frame kernel"))?;
        let stream = self.preprocessor.stream();
        preprocessed
            .record(stream)
            .map_err(TrtError::gpu("record an event"))?;
        // SAFETY: `raw` is the preprocessor's live stream; the engines are
        // bound to tensors owned by `self` (see `new`), which outlive the
        // queued work because `Drop` waits for the stream.
        unsafe { self.backend.enqueue(ModelRole::Segmentation, raw)? };
        self.preprocessor
            .enqueue_mask()
            .map_err(TrtError::gpu("queue the mask kernels"))?;
        let stream = self.preprocessor.stream();
        masked
            .record(stream)
            .map_err(TrtError::gpu("record an event"))?;
        // SAFETY: as above.
        unsafe { self.backend.enqueue(ModelRole::Classifier, raw)? };
        // SAFETY: `cls_logits` is read only after `done` completes (in
        // `complete_frame`); both buffers are owned by `self`.
        unsafe {
            self.backend.queue_output_download(
                ModelRole::Classifier,
                stream,
                &mut self.cls_logits,
            )?
        };
        done.record(stream)
            .map_err(TrtError::gpu("record an event"))
    }

    /// Waits once for the frame submitted last and fills the decision's inputs.
    pub fn complete_frame(&mut self, work: &mut FrameWork) -> Result<DeviceTimings, TrtError> {
        let [begin, preprocessed, masked, done] = &self.events;
        work.mask_pixels = self
            .preprocessor
            .wait_mask_pixels()
            .map_err(TrtError::gpu("wait for the mask"))?;
        done.synchronize()
            .map_err(TrtError::gpu("wait for the classifier"))?;
        work.cls_logits.copy_from_slice(self.cls_logits.as_slice());
        let ms = |later: &Event, earlier: &Event| -> Result<f64, TrtError> {
            Ok(f64::from(
                later
                    .elapsed_ms_since(earlier)
                    .map_err(TrtError::gpu("read a timing event"))?,
            ))
        };
        Ok(DeviceTimings {
            preprocess_ms: ms(preprocessed, begin)?,
            segment_ms: ms(masked, preprocessed)?,
            classify_ms: ms(done, masked)?,
        })
    }
}

impl crate::infer::device_stage::DeviceFramePath for DevicePath {
    fn kind(&self) -> crate::infer::BackendKind {
        crate::infer::BackendKind::TensorRt
    }

    fn submit(
        &mut self,
        frame: ImageView<'_>,
    ) -> Result<(), crate::infer::device_stage::DeviceFrameError> {
        Ok(self.submit_frame(frame)?)
    }

    fn complete(
        &mut self,
        work: &mut FrameWork,
    ) -> Result<crate::infer::device_stage::GpuTimings, crate::infer::device_stage::DeviceFrameError>
    {
        let t = self.complete_frame(work)?;
        Ok(crate::infer::device_stage::GpuTimings {
            preprocess_ms: t.preprocess_ms,
            segment_ms: t.segment_ms,
            classify_ms: t.classify_ms,
        })
    }

    fn traffic(&self, frame: &ImageView<'_>) -> crate::infer::device_stage::FrameTraffic {
        crate::infer::device_stage::FrameTraffic::device_path(frame, self.cls_logits.len())
    }
}

impl Drop for DevicePath {
    fn drop(&mut self) {
        // The engines point into the preprocessor's tensors: nothing may be
        // freed while queued work can still touch them.
        if let Err(e) = self.preprocessor.stream().synchronize() {
            self.gpu.record_drop_error(
                "synchronizing the device path's stream before freeing it",
                e,
            );
        }
    }
}

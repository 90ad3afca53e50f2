//! Test doubles for the device stage's tests: a fake "GPU" path
//! (`FakeDevicePath`) that answers from each entry's first byte (a frame's,
//! or a cavity crop's), a fake swap candidate and engine, and a stage over
//! a fresh ring.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender, bounded};

use super::{DeviceStage, DeviceSwap};
use crate::capture::{CaptureEvent, EndOfStream};
use crate::config::OverflowPolicy;
use crate::frame::{FrameWork, ImageView, PixelLayout, StageMessage, TensorGeometry};
use crate::frame_bytes::{HostPlacement, SlotMemory};
use crate::gpu::Stream;
use crate::infer::backend::BackendKind;
use crate::infer::batch::BatchPolicy;
use crate::infer::device_error::DeviceFrameError;
use crate::infer::device_path::{
    BoundTensors, DeviceCandidate, DeviceEngine, DeviceFramePath, DeviceModelsOpener, FramePart,
    GpuTimings, PathInfo, ReadWait, SwapSite,
};
use crate::infer::model_role::ModelRole;
use crate::model_id::ModelIds;
use crate::preprocess::CycleCrops;
use crate::ring::frame_ring;
use crate::trigger::PartRings;

pub(super) const ONE_AT_A_TIME: BatchPolicy = BatchPolicy {
    max_batch: 1,
    wait: Duration::ZERO,
};

pub(super) const TINY: TensorGeometry = TensorGeometry {
    seg_hw: (4, 4),
    seg_classes: 2,
    cls_hw: (2, 2),
    cls_classes: 2,
};

/// Test double: new models of engine `generation`; binding them makes
/// that generation the one `bound` names (the fake path's engine).
pub(super) struct FakeCandidate {
    pub(super) generation: u64,
    pub(super) bound: Arc<AtomicU64>,
}

impl DeviceCandidate for FakeCandidate {
    fn geometry(&self) -> TensorGeometry {
        TINY
    }
    fn warm_up(&mut self) -> Result<(), DeviceFrameError> {
        Ok(())
    }
    unsafe fn bind(
        self: Box<Self>,
        _tensors: BoundTensors,
    ) -> Result<Box<dyn DeviceEngine>, DeviceFrameError> {
        self.bound.store(self.generation, Ordering::SeqCst);
        Ok(Box::new(FakeEngine))
    }
}

/// Test double: the engine a `FakeCandidate` binds into; the fake path
/// judges frames itself, so nothing is ever queued on it.
struct FakeEngine;

impl DeviceEngine for FakeEngine {
    fn kind(&self) -> BackendKind {
        BackendKind::OnnxRuntimeCuda
    }
    fn max_batch(&self) -> usize {
        1
    }
    fn enqueue(
        &mut self,
        _role: ModelRole,
        _stream: &Stream,
        _frames: usize,
    ) -> Result<(), DeviceFrameError> {
        Err(DeviceFrameError::Unsupported("a test double's engine"))
    }
    fn swap_opener(&self, _site: SwapSite) -> Arc<dyn DeviceModelsOpener> {
        unreachable!("the fake path has no swap opener")
    }
}

/// Test double: a "GPU" that answers from the entry's first byte (the
/// frame's, or its crop's) plus 1000 times its engine's generation (as at
/// stage), so the test sees which frame or cavity each result came from
/// and which engine judged it, and holds up to `depth` batches of up to
/// `max_batch` entries like a stream would. Like the device runner, it
/// refuses a swap with frames in flight, and a crop of a frame other than
/// the one staged just before.
pub(super) struct FakeDevicePath {
    /// Launched batches, oldest first: per frame its first byte, engine
    /// generation, and whether the mask was asked for.
    pub(super) queued: VecDeque<Vec<(u8, u64, bool)>>,
    /// The batch being staged.
    pub(super) staging: Vec<(u8, u64, bool)>,
    pub(super) depth: usize,
    pub(super) max_batch: usize,
    pub(super) most_in_flight: usize,
    /// The size of every batch launched.
    pub(super) batch_sizes: Vec<usize>,
    /// The generation of the engine bound last (`FakeCandidate::bind`).
    pub(super) generation: Arc<AtomicU64>,
    /// When the frame with this first byte is submitted, this swap is
    /// sent (a reload finishing while frames are on the GPU).
    pub(super) swap_on: Option<(u8, Sender<DeviceSwap>, DeviceSwap)>,
    /// `Some`: frames are read in place, like page-locked ring slots,
    /// and the reads end late: only the first `released` frames staged
    /// are read (the test moves it; the stand-in for the slots' events).
    pub(super) released: Option<Arc<AtomicU64>>,
    /// Frames put on the "GPU" so far (each one's staging number): a
    /// whole frame, or a frame's first crop.
    pub(super) staged: u64,
    /// Every stage call's part, in order.
    pub(super) parts: Vec<FramePart>,
    /// The address and length of the bytes of the frame staged last, which
    /// a later crop must name again.
    last_frame: Option<(usize, usize)>,
}

impl FakeDevicePath {
    pub(super) fn new(depth: usize) -> Self {
        Self::batching(depth, 1)
    }

    pub(super) fn batching(depth: usize, max_batch: usize) -> Self {
        FakeDevicePath {
            queued: VecDeque::new(),
            staging: Vec::new(),
            depth,
            max_batch,
            most_in_flight: 0,
            batch_sizes: Vec::new(),
            generation: Arc::default(),
            swap_on: None,
            released: None,
            staged: 0,
            parts: Vec::new(),
            last_frame: None,
        }
    }
}

impl DeviceFramePath for FakeDevicePath {
    fn describe(&self) -> PathInfo {
        PathInfo {
            kind: BackendKind::OnnxRuntimeCuda,
            geometry: TINY,
            max_batch: self.max_batch,
            max_in_flight: self.depth,
            cls_classes: TINY.cls_classes,
            mask_bytes: 0,
            slot_allocator: None,
            swap_opener: None,
        }
    }
    fn stage(
        &mut self,
        frame: ImageView<'_>,
        _placement: HostPlacement,
        host_mask: bool,
        part: FramePart,
    ) -> Result<Option<u64>, DeviceFrameError> {
        assert!(
            self.queued.len() < self.depth,
            "a batch staged while the most batches are in flight"
        );
        assert!(
            self.staging.len() < self.max_batch,
            "more frames staged than a batch holds"
        );
        self.parts.push(part);
        let bytes = (frame.data.as_ptr() as usize, frame.data.len());
        let (entry, uploads) = match part {
            FramePart::Whole => (frame, true),
            FramePart::Crop { rect, first } => {
                let crop = frame
                    .crop(
                        rect.x as usize,
                        rect.y as usize,
                        rect.width as usize,
                        rect.height as usize,
                    )
                    .expect("a crop inside the frame");
                if !first {
                    assert_eq!(
                        self.last_frame,
                        Some(bytes),
                        "a later crop names the frame staged just before"
                    );
                }
                (crop, first)
            }
        };
        let first = entry.data.first().copied().unwrap_or_default();
        if first == 0xDD {
            if uploads {
                self.last_frame = None;
            }
            return Err(DeviceFrameError::Unsupported("a frame refused at staging"));
        }
        if uploads {
            self.staged += 1;
            self.last_frame = Some(bytes);
        }
        let number = self.staged - 1;
        let generation = self.generation.load(Ordering::SeqCst);
        self.staging.push((first, generation, host_mask));
        if self.swap_on.as_ref().is_some_and(|(on, ..)| *on == first)
            && let Some((_, to_stage, swap)) = self.swap_on.take()
        {
            to_stage.send(swap).unwrap();
        }
        Ok(self.released.is_some().then_some(number))
    }
    fn reads_done(&mut self, wait: ReadWait) -> Result<u64, DeviceFrameError> {
        if let (ReadWait::All, Some(released)) = (wait, &self.released) {
            released.fetch_max(self.staged, Ordering::SeqCst);
        }
        Ok(match &self.released {
            Some(released) => released.load(Ordering::SeqCst).min(self.staged),
            None => u64::MAX,
        })
    }
    fn launch(&mut self) -> Result<(), DeviceFrameError> {
        if self.staging.is_empty() {
            return Ok(());
        }
        let batch = std::mem::take(&mut self.staging);
        self.batch_sizes.push(batch.len());
        self.queued.push_back(batch);
        self.most_in_flight = self.most_in_flight.max(self.queued.len());
        Ok(())
    }
    fn complete(&mut self, work: &mut FrameWork) -> Result<GpuTimings, DeviceFrameError> {
        let Some(batch) = self.queued.front_mut() else {
            return Err(DeviceFrameError::Unsupported("nothing launched"));
        };
        let (first, generation, host_mask) = batch.remove(0);
        if batch.is_empty() {
            self.queued.pop_front();
        }
        if first == 0xEE {
            return Err(DeviceFrameError::Unsupported("a failing frame"));
        }
        work.mask_pixels = u64::from(first) + 1000 * generation;
        work.cls_logits.fill(f32::from(first));
        if host_mask {
            work.mask.fill(f32::from(first));
        }
        Ok(GpuTimings {
            upload_ms: 0.5,
            preprocess_ms: 1.0,
            segment_ms: 2.0,
            classify_ms: 3.0,
            batch_ms: 7.0,
        })
    }
    fn swap_engine(
        &mut self,
        candidate: Box<dyn DeviceCandidate>,
    ) -> Result<usize, DeviceFrameError> {
        if !self.queued.is_empty() || !self.staging.is_empty() {
            return Err(DeviceFrameError::Swap(format!(
                "{} batch(es) still on the stream",
                self.queued.len()
            )));
        }
        let tensor = crate::gpu::DeviceTensor {
            ptr: 0,
            len: 0,
            element: crate::gpu::TensorElement::F32,
        };
        let tensors = BoundTensors {
            seg_input: tensor,
            seg_logits: tensor,
            cls_input: tensor,
            cls_logits: tensor,
            frames: 1,
        };
        // SAFETY: a test double's candidate never touches the tensors.
        unsafe { candidate.bind(tensors) }?;
        Ok(self.max_batch)
    }
}

/// Runs `stage` over `path` as the device thread does once the path is
/// open and warmed up, no camera with a cavity layout.
pub(super) fn run_stage(
    stage: DeviceStage,
    path: &mut FakeDevicePath,
    frames_in_flight: usize,
    batching: BatchPolicy,
) -> EndOfStream {
    run_stage_with(stage, path, frames_in_flight, batching, CycleCrops::none())
}

/// As `run_stage`, with the cameras' cavity layouts `crops`.
pub(super) fn run_stage_with(
    stage: DeviceStage,
    path: &mut FakeDevicePath,
    frames_in_flight: usize,
    batching: BatchPolicy,
    crops: CycleCrops,
) -> EndOfStream {
    let info = path.describe();
    stage.run(path, &info, frames_in_flight, batching, crops)
}

pub(super) fn ids(segmentation: &str, classifier: &str) -> Arc<ModelIds> {
    Arc::new(ModelIds {
        segmentation: segmentation.to_string(),
        classifier: classifier.to_string(),
        recipe: None,
    })
}

/// A device stage reading a fresh ring of `slots` frame slots, with
/// `records` work records: the ring's producer, the stage, where work
/// records go back, and the stage's output.
pub(super) fn stage_over_ring(
    slots: usize,
    records: usize,
) -> (
    crate::capture::RingProducer,
    DeviceStage,
    Sender<Box<FrameWork>>,
    Receiver<StageMessage>,
    Sender<DeviceSwap>,
) {
    let geometry = TINY;
    let (producer, consumer) = frame_ring(slots);
    let (free_tx, free_rx) = bounded(records);
    for _ in 0..records {
        free_tx.send(Box::new(FrameWork::new(&geometry))).unwrap();
    }
    let (out_tx, out_rx) = bounded(16);
    let (swap_tx, swap_rx) = bounded(1);
    let stage = DeviceStage {
        input: PartRings::free(crate::capture::CameraRings::new(vec![consumer])),
        output: out_tx,
        free_work: free_rx,
        liveness: crate::service::Liveness::new(),
        models: ids("old-seg", "old-cls"),
        swaps: swap_rx,
        pixel_demand: Arc::default(),
        batch_counts: Arc::default(),
        slot_memory: SlotMemory::new(),
    };
    (producer, stage, free_tx, out_rx, swap_tx)
}

pub(super) fn tiny_frame(producer: &mut crate::capture::RingProducer, seq: u64, first: u8) {
    let mut slot = producer.acquire_slot(OverflowPolicy::Block).unwrap();
    slot.meta.seq = seq;
    slot.width = 2;
    slot.height = 1;
    slot.stride = 6;
    slot.layout = PixelLayout::Rgb;
    slot.data.clear();
    slot.data.extend_from_slice(&[first, 0, 0, 0, 0, 0]);
    producer.push(CaptureEvent::Frame(slot));
}

/// The stage's output until its end: per frame (seq, mask pixels,
/// failed), per drop marker (first seq, count, true); work records go
/// back as they come.
pub(super) fn results_until_the_end(
    out_rx: &Receiver<StageMessage>,
    free_tx: &Sender<Box<FrameWork>>,
) -> Vec<(u64, u64, bool)> {
    let mut seen = Vec::new();
    loop {
        match out_rx.recv_timeout(Duration::from_secs(10)).unwrap() {
            StageMessage::Inspect(work) => {
                seen.push((work.meta.seq, work.mask_pixels, work.error.is_some()));
                // The stage may already have ended after the last frame.
                let _ = free_tx.send(work);
            }
            StageMessage::NotInspected { first, count } => seen.push((first.seq, count, true)),
            StageMessage::End => return seen,
            StageMessage::CaptureFailed { .. } => panic!("no capture failure was sent"),
            StageMessage::PartMissed { .. } => panic!("no trigger was sent"),
        }
    }
}

/// The cameras' cavity layouts with camera 0's `layout` (the demo
/// config's other settings; no frame size fixed).
pub(super) fn crops_of(layout: crate::config::CavityLayout) -> CycleCrops {
    let mut config = crate::config::load(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config/demo.toml"),
    )
    .unwrap();
    config.cameras[0].source.layout = Some(Arc::new(layout));
    CycleCrops::from_config(&config)
}

/// A layout of cavities 2x1 pixels side by side in a row, from x = 0; the
/// numbers in `disabled` left out, no margin.
pub(super) fn row_layout(cavities: u32, disabled: &[u16]) -> crate::config::CavityLayout {
    let rects = (0..cavities)
        .map(|i| crate::config::CavityRect {
            x: 2 * i,
            y: 0,
            width: 2,
            height: 1,
        })
        .collect();
    crate::config::CavityLayout::new(rects, disabled, 0, None).unwrap()
}

/// A frame of one row whose cavity `i` (2 pixels from x = 2i, as
/// `row_layout`) starts with byte `firsts[i]`.
pub(super) fn cavity_frame(producer: &mut crate::capture::RingProducer, seq: u64, firsts: &[u8]) {
    let mut slot = producer.acquire_slot(OverflowPolicy::Block).unwrap();
    slot.meta.seq = seq;
    slot.width = 2 * firsts.len() as u32;
    slot.height = 1;
    slot.stride = 6 * firsts.len();
    slot.layout = PixelLayout::Rgb;
    slot.data.clear();
    for &first in firsts {
        slot.data.extend_from_slice(&[first, 0, 0, 0, 0, 0]);
    }
    producer.push(CaptureEvent::Frame(slot));
}

/// One record out of the stage: seq, cavity (number, index, of), mask
/// pixels (the fake's answer), error.
pub(super) type Record = (u64, Option<(u16, u16, u16)>, u64, Option<String>);

/// The stage's records until its end, work records going back as they come.
pub(super) fn records_until_the_end(
    out_rx: &Receiver<StageMessage>,
    free_tx: &Sender<Box<FrameWork>>,
) -> Vec<Record> {
    let mut seen = Vec::new();
    loop {
        match out_rx.recv_timeout(Duration::from_secs(10)).unwrap() {
            StageMessage::Inspect(work) => {
                seen.push(record(&work));
                let _ = free_tx.send(work);
            }
            StageMessage::End => return seen,
            _ => panic!("only frames were sent"),
        }
    }
}

pub(super) fn record(work: &FrameWork) -> Record {
    (
        work.meta.seq,
        work.cavity.map(|t| (t.number, t.index, t.of)),
        work.mask_pixels,
        work.error.as_ref().map(|(_, e)| e.clone()),
    )
}

//! What travels between stages: a captured frame (`FrameSlot`) and the per-frame
//! work record (`FrameWork`) that preprocessing, inference and decision fill in.
//!
//! Both are allocated once at start and recycled, so the steady state allocates nothing.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Instant, SystemTime};

use crate::frame_bytes::{FrameBytes, SlotMemory};
use crate::model_id::ModelIds;

/// Byte order of the pixels in a captured frame. Capture converts to `Rgb`;
/// the others exist for the GPU kernels, which read the camera's own layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PixelLayout {
    #[default]
    Rgb,
    Bgr,
    Rgba,
    Bgrx,
}

impl PixelLayout {
    pub fn bytes_per_pixel(self) -> usize {
        match self {
            PixelLayout::Rgb | PixelLayout::Bgr => 3,
            PixelLayout::Rgba | PixelLayout::Bgrx => 4,
        }
    }
}

/// Which of the process's cameras a frame came from: its place in
/// `Config::cameras` (0 for a single `[source]`). The ring producer of each
/// camera stamps it on every event it pushes, so nothing upstream of the
/// ring has to know it.
pub type CameraIndex = u16;

/// When a trigger asked for a part, in both clocks, and who asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TriggerTime {
    /// Wall clock, for result lines and messages.
    pub at: SystemTime,
    /// Monotonic, for the deadline and latency.
    pub instant: Instant,
    pub by: TriggeredBy,
}

/// Who triggered a part. The PLC's result buffer takes only the parts it
/// asked for (and every part in `camera` mode): a result of a part
/// triggered over HTTP would wait there for a PLC that never asked for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TriggeredBy {
    /// The PLC over Modbus TCP.
    Plc,
    /// `POST /api/trigger`.
    Http,
    /// The camera's input line (`camera` mode).
    Camera,
    /// An OPC UA client's `StartSingleJob` (`crate::opcua`).
    OpcUa,
}

impl TriggerTime {
    pub fn now(by: TriggeredBy) -> Self {
        TriggerTime {
            at: SystemTime::now(),
            instant: Instant::now(),
            by,
        }
    }
}

/// Which part a result stands for (`[trigger] mode`).
///
/// In `free` mode every frame is a part: `number` and `id` are the frame's
/// `seq`. In `plc` mode a part is an accepted trigger: `number` counts the
/// camera's accepted triggers from 0 (the line's order), `id` is what the
/// PLC named it, and the frame that judged it (if any) is `FrameMeta::seq`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Part {
    /// The part's place on its camera's line, from 0, with no gaps: what
    /// `line::Line` orders verdicts by.
    pub number: u64,
    /// The part's id as the line names it (a u32 over Modbus).
    pub id: u64,
    /// The trigger that asked for it; `None` in `free` mode.
    pub trigger: Option<TriggerTime>,
    /// Whether a frame stands behind this result. `false` for a trigger's
    /// fail without a frame (`no_frame`, `overrun`): `seq` and the capture
    /// times are then the trigger's moment and no frame's.
    pub framed: bool,
}

impl Part {
    /// The part of a free-running camera's frame `seq`.
    pub fn free(seq: u64) -> Part {
        Part {
            number: seq,
            id: seq,
            trigger: None,
            framed: true,
        }
    }

    /// The part of frame `seq` of a camera triggered on its own input line
    /// (`camera` mode): its id is the count of the camera's frames, and its
    /// trigger is the frame's capture (the first moment sealcheck sees).
    pub fn counted(seq: u64, at: SystemTime, instant: Instant) -> Part {
        Part {
            number: seq,
            id: seq + 1,
            trigger: Some(TriggerTime {
                at,
                instant,
                by: TriggeredBy::Camera,
            }),
            framed: true,
        }
    }

    /// The id a trigger named (`plc` mode) or the camera counted (`camera`
    /// mode); `None` in `free` mode, where the id is only the frame's `seq`
    /// and outputs leave it out.
    pub fn triggered_id(&self) -> Option<u64> {
        self.trigger.map(|_| self.id)
    }

    /// When the part's clock starts: its trigger, else its frame's capture.
    pub fn started(&self, meta: &FrameMeta) -> (SystemTime, Instant) {
        match self.trigger {
            Some(t) => (t.at, t.instant),
            None => (meta.captured_at, meta.captured_instant),
        }
    }
}

/// Identity of one delivered frame: its camera, its place in that camera's
/// stream and when it was captured, and the part it is judged for.
#[derive(Debug, Clone, Copy)]
pub struct FrameMeta {
    /// Counts every frame the camera delivered, from 0, with no gaps
    /// (each camera counts on its own).
    pub seq: u64,
    pub camera: CameraIndex,
    /// Wall-clock capture time, for the results file.
    pub captured_at: SystemTime,
    /// Monotonic capture time, for latency.
    pub captured_instant: Instant,
    /// The part this frame's result is for: `Part::free(seq)` until a
    /// trigger claims the frame (`trigger::PartRings`).
    pub part: Part,
}

impl FrameMeta {
    pub fn now(seq: u64) -> Self {
        FrameMeta {
            seq,
            camera: 0,
            captured_at: SystemTime::now(),
            captured_instant: Instant::now(),
            part: Part::free(seq),
        }
    }

    /// The meta of frame `seq + k` of a run that started at this one (a run
    /// of dropped frames shares its first frame's times): a free part each.
    pub fn nth_of_run(&self, k: u64) -> FrameMeta {
        if k == 0 {
            // The run's first frame keeps its part (a trigger may have claimed it).
            return *self;
        }
        let seq = self.seq + k;
        // Only `free` and `camera` mode expand a run of drops (`plc` mode
        // passes them over), so a part with a trigger here is a counted one.
        let part = match self.part.trigger {
            Some(_) => Part::counted(seq, self.captured_at, self.captured_instant),
            None => Part::free(seq),
        };
        FrameMeta { seq, part, ..*self }
    }

    /// When the result's clock starts: the trigger in `plc` mode, else capture.
    pub fn started_instant(&self) -> Instant {
        self.part.started(self).1
    }
}

/// One preallocated frame buffer. Rows may be padded: always index with `stride`.
#[derive(Debug)]
pub struct FrameSlot {
    pub meta: FrameMeta,
    pub width: u32,
    pub height: u32,
    /// Bytes from one row to the next (at least `width * bytes_per_pixel`).
    pub stride: usize,
    pub layout: PixelLayout,
    /// Grows to the frame size on the first frame; `len()` is `stride *
    /// height` of the current frame. Page-locked when the device path runs
    /// (`crate::frame_bytes`).
    pub data: FrameBytes,
    /// When capture finished copying the frame in (`None`: a producer
    /// that does not say).
    pub in_slot: Option<Instant>,
}

impl FrameSlot {
    pub fn with_capacity(bytes: usize) -> Self {
        FrameSlot {
            meta: FrameMeta::now(0),
            width: 0,
            height: 0,
            stride: 0,
            layout: PixelLayout::Rgb,
            data: FrameBytes::heap(bytes),
            in_slot: None,
        }
    }

    /// An empty slot whose bytes grow from `memory` (a ring's pool).
    pub fn in_memory(memory: SlotMemory) -> Self {
        FrameSlot {
            data: FrameBytes::in_memory(memory),
            ..Self::with_capacity(0)
        }
    }

    /// A view of the pixels for preprocessing.
    pub fn image(&self) -> ImageView<'_> {
        ImageView {
            width: self.width as usize,
            height: self.height as usize,
            stride: self.stride,
            layout: self.layout,
            data: &self.data,
        }
    }
}

/// Borrowed 8-bit image with row stride; what preprocessing reads.
#[derive(Debug, Clone, Copy)]
pub struct ImageView<'a> {
    pub width: usize,
    pub height: usize,
    pub stride: usize,
    pub layout: PixelLayout,
    pub data: &'a [u8],
}

impl<'a> ImageView<'a> {
    /// The `width` x `height` pixels from column `x`, row `y`: the same rows
    /// (same stride), read from the crop's first pixel on; no copy. `None`
    /// when the rectangle leaves the image.
    pub fn crop(&self, x: usize, y: usize, width: usize, height: usize) -> Option<ImageView<'a>> {
        if x.checked_add(width)? > self.width || y.checked_add(height)? > self.height {
            return None;
        }
        let start = y * self.stride + x * self.layout.bytes_per_pixel();
        Some(ImageView {
            width,
            height,
            stride: self.stride,
            layout: self.layout,
            data: self.data.get(start..)?,
        })
    }
}

/// Which cavity of its frame a work record judges, with a cavity layout
/// (`config::CavityLayout`): the preprocess stage crops each judged cavity
/// into a work record of its own, and the output stage gathers a frame's
/// records back into one cycle (`output::CycleAssembler`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CavityTag {
    /// The cavity's number in the layout, from 1.
    pub number: u16,
    /// Its place among the frame's judged cavities, from 0: the records of
    /// one frame travel one after another, in this order.
    pub index: u16,
    /// How many of the frame's cavities are judged: its cycle is whole with
    /// the record of `index == of - 1`.
    pub of: u16,
}

impl CavityTag {
    /// Whether this is the last record of its frame's cycle.
    pub fn is_last(&self) -> bool {
        self.index + 1 == self.of
    }
}

/// Tensor shapes of the two models, read from the model files at start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TensorGeometry {
    /// Segmentation input height and width (640x640 for the demo models).
    pub seg_hw: (usize, usize),
    /// Number of classes in the segmentation logits.
    pub seg_classes: usize,
    /// Classifier input height and width (224x512 for the demo models).
    pub cls_hw: (usize, usize),
    /// Number of classes in the classifier logits.
    pub cls_classes: usize,
}

impl TensorGeometry {
    pub fn seg_input_len(&self) -> usize {
        3 * self.seg_hw.0 * self.seg_hw.1
    }
    pub fn seg_logits_len(&self) -> usize {
        self.seg_classes * self.seg_hw.0 * self.seg_hw.1
    }
    pub fn mask_len(&self) -> usize {
        self.seg_hw.0 * self.seg_hw.1
    }
    pub fn cls_input_len(&self) -> usize {
        4 * self.cls_hw.0 * self.cls_hw.1
    }
}

/// Milliseconds spent in each stage for one frame.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct StageTimings {
    pub preprocess_ms: f64,
    pub segment_ms: f64,
    pub classify_ms: f64,
    /// When the frame passed the host's hand-overs, for the run's frame
    /// spans (`output::FrameSpans`).
    pub stamps: HostStamps,
}

/// When a frame passed each hand-over on the host (monotonic clock); `None`
/// where its path does not stamp (only the device path stamps them all).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct HostStamps {
    /// Capture's copy into the ring slot was done (`FrameSlot::in_slot`).
    pub in_slot: Option<Instant>,
    /// Its stage took it from the ring.
    pub taken: Option<Instant>,
    /// Its batch was put on the GPU.
    pub launched: Option<Instant>,
    /// Its results were on the host.
    pub done: Option<Instant>,
}

/// Where in a frame's path something failed; becomes reason `error` (fail safe).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailedStage {
    Capture,
    Preprocess,
    Segment,
    Classify,
}

impl FailedStage {
    pub fn as_str(self) -> &'static str {
        match self {
            FailedStage::Capture => "capture",
            FailedStage::Preprocess => "preprocess",
            FailedStage::Segment => "segment",
            FailedStage::Classify => "classify",
        }
    }
}

/// The per-frame work record. Buffers are sized once from `TensorGeometry`
/// and reused for every frame.
#[derive(Debug)]
pub struct FrameWork {
    pub meta: FrameMeta,
    /// 1x3xHxW normalized segmentation input.
    pub seg_input: Vec<f32>,
    /// 1xCxHxW segmentation logits.
    pub seg_logits: Vec<f32>,
    /// HxW, 1.0 where the seal class wins, else 0.0.
    pub mask: Vec<f32>,
    /// Pixels of `mask` that are 1.0.
    pub mask_pixels: u64,
    /// 1x4xHxW classifier input: RGB filled by preprocess, mask channel by infer.
    pub cls_input: Vec<f32>,
    /// 1xC classifier logits.
    pub cls_logits: Vec<f32>,
    pub timings: StageTimings,
    /// Set when a stage failed for this frame; the frame then fails with reason `error`.
    pub error: Option<(FailedStage, String)>,
    /// The models that judged this frame, set by the stage that ran them (a
    /// model swap on reload changes them between two frames).
    pub models: Option<Arc<ModelIds>>,
    /// The frame's pixels, kept only while the archive or the live view asks
    /// for them (`PixelDemand`): the ring slot goes back to capture right
    /// after preprocessing, before the verdict is known. With a cavity
    /// layout only the cycle's first record keeps them.
    pub pixels: FramePixels,
    /// With a cavity layout: the cavity this record judges; `None`: the
    /// whole frame is one seal.
    pub cavity: Option<CavityTag>,
}

impl FrameWork {
    pub fn new(geometry: &TensorGeometry) -> Self {
        FrameWork {
            meta: FrameMeta::now(0),
            seg_input: vec![0.0; geometry.seg_input_len()],
            seg_logits: vec![0.0; geometry.seg_logits_len()],
            mask: vec![0.0; geometry.mask_len()],
            mask_pixels: 0,
            cls_input: vec![0.0; geometry.cls_input_len()],
            cls_logits: vec![0.0; geometry.cls_classes],
            timings: StageTimings::default(),
            error: None,
            models: None,
            pixels: FramePixels::default(),
            cavity: None,
        }
    }

    /// Clears per-frame state before reuse (buffers are overwritten, not cleared).
    pub fn reset(&mut self, meta: FrameMeta) {
        self.meta = meta;
        self.mask_pixels = 0;
        self.timings = StageTimings::default();
        self.error = None;
        self.models = None;
        self.pixels.valid = false;
        self.cavity = None;
    }

    /// Fraction of the mask covered by the seal.
    pub fn seal_area(&self) -> f64 {
        if self.mask.is_empty() {
            0.0
        } else {
            self.mask_pixels as f64 / self.mask.len() as f64
        }
    }
}

/// What flows from preprocess to infer to output, in capture order.
#[derive(Debug)]
pub enum StageMessage {
    /// A frame to inspect (or, with `error` set, one that failed on the way).
    Inspect(Box<FrameWork>),
    /// `count` consecutive frames from `first.seq` were dropped under the drop policy.
    NotInspected { first: FrameMeta, count: u64 },
    /// A delivered frame that capture could not copy; it fails with reason `error`.
    CaptureFailed { meta: FrameMeta, message: String },
    /// A triggered part no frame was judged for (`meta.part.framed` is
    /// false; its times are the trigger's): it fails with `miss`'s reason.
    PartMissed { meta: FrameMeta, miss: PartMiss },
    /// No more frames will come.
    End,
}

/// What a `FrameSource` gives the frame loop (`infer::batcher::Batcher`).
#[derive(Debug)]
pub enum Next<Frame, Other> {
    /// A frame to judge.
    Frame(Frame),
    /// Not a frame: a marker, a change, the end; passed on in its place.
    Other(Other),
    /// Nothing came within the wait.
    Idle,
    /// Nothing will ever come again (the sending side is gone).
    Closed,
}

/// Where a path's frames come from, in the order they are to be judged:
/// what the one frame loop (`infer::batcher::Batcher`) reads. Each source's
/// impl sits beside its type: the stage channel's here, the cameras' rings'
/// in `trigger::rings` (`PartRings`), the shadow's in `shadow::judge`.
pub trait FrameSource {
    type Frame;
    type Other;

    /// The next message, waiting up to `wait` (zero: only one already
    /// waiting).
    fn next(&mut self, wait: std::time::Duration) -> Next<Self::Frame, Self::Other>;
}

/// The host infer thread's source: preprocessed frames and the markers
/// between them, in capture order per camera.
impl FrameSource for crossbeam_channel::Receiver<StageMessage> {
    type Frame = Box<FrameWork>;
    type Other = StageMessage;

    fn next(&mut self, wait: std::time::Duration) -> Next<Box<FrameWork>, StageMessage> {
        use crossbeam_channel::RecvTimeoutError;
        // A zero wait takes only a message already there.
        let message = match self.recv_timeout(wait) {
            Ok(message) => message,
            Err(RecvTimeoutError::Timeout) => return Next::Idle,
            Err(RecvTimeoutError::Disconnected) => return Next::Closed,
        };
        match message {
            StageMessage::Inspect(work) => Next::Frame(work),
            other => Next::Other(other),
        }
    }
}

/// Why a triggered part got no frame (`[trigger] mode = "plc"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PartMiss {
    /// No frame within `frame_wait_ms` of its moment (camera lost or frozen).
    NoFrame,
    /// The frame it would have claimed was claimed by the trigger before it.
    Overrun,
}

/// A copy of a frame's pixels that travels with its work record. The buffer
/// grows to the frame size on first use and is reused (or swapped with an
/// equally reused one) afterwards: no allocation per frame.
#[derive(Debug, Default)]
pub struct FramePixels {
    pub width: u32,
    pub height: u32,
    pub stride: usize,
    pub layout: PixelLayout,
    pub data: Vec<u8>,
    /// Whether `data` holds this frame's pixels.
    pub valid: bool,
}

impl FramePixels {
    /// Copies `frame` (rows as they are, stride included).
    pub fn copy_from(&mut self, frame: &FrameSlot) {
        self.width = frame.width;
        self.height = frame.height;
        self.stride = frame.stride;
        self.layout = frame.layout;
        self.data.clear();
        self.data.extend_from_slice(&frame.data);
        self.valid = true;
    }

    /// Copies another copy, reusing this one's buffer.
    pub fn clone_from_pixels(&mut self, other: &FramePixels) {
        self.width = other.width;
        self.height = other.height;
        self.stride = other.stride;
        self.layout = other.layout;
        self.data.clear();
        self.data.extend_from_slice(&other.data);
        self.valid = other.valid;
    }

    pub fn image(&self) -> ImageView<'_> {
        ImageView {
            width: self.width as usize,
            height: self.height as usize,
            stride: self.stride,
            layout: self.layout,
            data: &self.data,
        }
    }
}

/// Who wants frame pixels past preprocessing: the archive (every frame, as
/// the verdict is not known yet) and the live view (now and then, while a
/// page is open). Read once per frame by the stage that reads the ring.
///
/// The shadow (`crate::shadow`) on the device path wants the pixels of the
/// frames due to it (every Nth), which it preprocesses on the CPU.
#[derive(Debug, Default)]
pub struct PixelDemand {
    archive: AtomicBool,
    live: AtomicBool,
    /// Frames whose `seq` is a multiple of this go to the shadow; 0 = none.
    shadow_every: AtomicU64,
}

impl PixelDemand {
    pub fn wanted(&self) -> bool {
        self.archive.load(Ordering::Relaxed) || self.live.load(Ordering::Relaxed)
    }

    /// Whether frame `seq`'s pixels are wanted, the shadow's frames included.
    pub fn wanted_for(&self, seq: u64) -> bool {
        let every = self.shadow_every.load(Ordering::Relaxed);
        self.wanted() || (every > 0 && seq.is_multiple_of(every))
    }

    pub fn set_shadow_every(&self, every: u64) {
        self.shadow_every.store(every, Ordering::Relaxed);
    }

    pub fn set_archive(&self, on: bool) {
        self.archive.store(on, Ordering::Relaxed);
    }

    /// A page asked for a newer live frame.
    pub fn request_live(&self) {
        self.live.store(true, Ordering::Relaxed);
    }

    /// The live view got one; stop copying for it.
    pub fn live_served(&self) {
        self.live.store(false, Ordering::Relaxed);
    }

    pub fn live_requested(&self) -> bool {
        self.live.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_channel_source_gives_frames_and_markers_and_says_when_it_closed() {
        let (tx, mut rx) = crossbeam_channel::bounded(4);
        assert!(matches!(rx.next(Duration::ZERO), Next::Idle));
        assert!(matches!(rx.next(Duration::from_millis(5)), Next::Idle));
        let geometry = TensorGeometry {
            seg_hw: (2, 2),
            seg_classes: 2,
            cls_hw: (2, 2),
            cls_classes: 2,
        };
        tx.send(StageMessage::Inspect(Box::new(FrameWork::new(&geometry))))
            .unwrap();
        tx.send(StageMessage::End).unwrap();
        drop(tx);
        assert!(matches!(rx.next(Duration::ZERO), Next::Frame(_)));
        assert!(matches!(
            rx.next(Duration::ZERO),
            Next::Other(StageMessage::End)
        ));
        assert!(matches!(rx.next(Duration::from_millis(200)), Next::Closed));
    }
}

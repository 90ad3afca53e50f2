//! The live view: each camera's latest frame with its seal mask, for the page.
//! A camera with a cavity layout shows its whole frame untinted (one
//! record's mask is one cavity's crop), with the cycle's reject mask for
//! the page to outline each cavity in its verdict's colour.
//!
//! ```text
//! page polls /api/live.jpg[?camera=NAME] --(that camera's frame older than 500 ms)--> wanted + PixelDemand::request_live
//! preprocess copies pixels --> output: LiveView::offer (try_lock; never waits) --> the camera's latest raw frame
//! HTTP: encode once per new frame (mask tinted), cached for every page polling
//! ```
//!
//! Nothing is copied or encoded while no page asks. One latest frame (and
//! one encoded copy) per camera that a page asked for, whatever the frame rate.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use crate::archive::{encode_rgb, mask_to_frame, packed_rgb, tint_mask};
use crate::config::ImageFormat;
use crate::cycle::CycleVerdicts;
use crate::decision::{Decision, Reason, Verdict};
use crate::frame::{FailedStage, FramePixels, FrameSlot, FrameWork, PixelDemand};

/// At most this often a new frame is taken for the page (2 per second).
const MIN_INTERVAL: Duration = Duration::from_millis(500);

struct LatestFrame {
    seq: u64,
    captured_at: SystemTime,
    /// False for a frame no trigger claimed (`[trigger] mode = "plc"`):
    /// shown, never judged (`verdict`, `reason` then mean nothing).
    judged: bool,
    verdict: Verdict,
    reason: Reason,
    /// With a cavity layout: bit `n - 1` set for each failed cavity `n`.
    reject_mask: Option<u64>,
    pixels: FramePixels,
    /// Model-space mask, 0 or 1 per pixel; empty when the frame had none.
    mask: Vec<u8>,
    mask_hw: (usize, usize),
    taken: Instant,
}

/// An encoded live frame.
#[derive(Debug, Clone)]
pub struct LiveJpeg {
    pub seq: u64,
    pub captured_at: SystemTime,
    /// False for a frame no trigger claimed: no verdict to show.
    pub judged: bool,
    pub verdict: Verdict,
    pub reason: Reason,
    /// With a cavity layout: bit `n - 1` set for each failed cavity `n`
    /// of the frame's cycle.
    pub reject_mask: Option<u64>,
    pub jpeg: Arc<Vec<u8>>,
}

pub struct LiveView {
    demand: Arc<PixelDemand>,
    /// By `FrameMeta::camera`; a camera's entry is made by the first page
    /// that asks for it (the HTTP side), never by the frame path.
    cameras: Mutex<Vec<Arc<CameraLive>>>,
}

/// One camera's live frame.
#[derive(Default)]
struct CameraLive {
    /// A page asked for a newer frame of this camera.
    wanted: AtomicBool,
    latest: Mutex<Option<LatestFrame>>,
    encoded: Mutex<Option<LiveJpeg>>,
}

impl LiveView {
    pub fn new(demand: Arc<PixelDemand>) -> Self {
        LiveView {
            demand,
            cameras: Mutex::new(Vec::new()),
        }
    }

    /// The output thread offers a judged frame (with a cavity layout, a
    /// cycle's: `cycle` its cavities); taken only when a page asked for its
    /// camera and the HTTP side is not reading right now.
    pub fn offer(
        &self,
        work: &FrameWork,
        d: &Decision,
        mask_hw: (usize, usize),
        cycle: Option<&CycleVerdicts>,
    ) -> bool {
        if !self.demand.live_requested() || !work.pixels.valid {
            return false;
        }
        let Ok(cameras) = self.cameras.try_lock() else {
            return false;
        };
        let Some(camera) = cameras.get(usize::from(work.meta.camera)) else {
            return false;
        };
        if !camera.wanted.load(Ordering::SeqCst) {
            return false;
        }
        let Ok(mut latest) = camera.latest.try_lock() else {
            return false;
        };
        let frame = latest.get_or_insert_with(|| LatestFrame {
            seq: 0,
            captured_at: SystemTime::UNIX_EPOCH,
            judged: true,
            verdict: d.verdict,
            reason: d.reason,
            reject_mask: None,
            pixels: FramePixels::default(),
            mask: Vec::new(),
            mask_hw: (0, 0),
            taken: Instant::now(),
        });
        frame.seq = work.meta.seq;
        frame.captured_at = work.meta.captured_at;
        frame.judged = true;
        frame.verdict = d.verdict;
        frame.reason = d.reason;
        frame.reject_mask = cycle.map(CycleVerdicts::reject_mask);
        frame.pixels.clone_from_pixels(&work.pixels);
        frame.mask.clear();
        let mask_made = cycle.is_none()
            && !matches!(
                &work.error,
                Some((
                    FailedStage::Capture | FailedStage::Preprocess | FailedStage::Segment,
                    _
                ))
            );
        if mask_made {
            frame
                .mask
                .extend(work.mask.iter().map(|m| u8::from(*m >= 0.5)));
        }
        frame.mask_hw = mask_hw;
        frame.taken = Instant::now();
        camera.wanted.store(false, Ordering::SeqCst);
        // Pixels are copied for every camera while any page waits: stop
        // only when no other camera is still waiting (checked after, so a
        // request made meanwhile turns the copying back on).
        self.demand.live_served();
        if cameras.iter().any(|c| c.wanted.load(Ordering::SeqCst)) {
            self.demand.request_live();
        }
        true
    }

    /// A frame no trigger claimed (`[trigger] mode = "plc"`), offered by
    /// the frame path before it goes back to capture: taken, without a
    /// mask or verdict, only when a page asked for its camera, so the
    /// page shows the camera while no part comes (a stopped line, a
    /// camera being aligned). Never waits.
    pub fn offer_unjudged(&self, frame: &FrameSlot) -> bool {
        if !self.demand.live_requested() {
            return false;
        }
        let Ok(cameras) = self.cameras.try_lock() else {
            return false;
        };
        let Some(camera) = cameras.get(usize::from(frame.meta.camera)) else {
            return false;
        };
        if !camera.wanted.load(Ordering::SeqCst) {
            return false;
        }
        let Ok(mut latest) = camera.latest.try_lock() else {
            return false;
        };
        let taken = latest.get_or_insert_with(|| LatestFrame {
            seq: 0,
            captured_at: SystemTime::UNIX_EPOCH,
            judged: false,
            verdict: Verdict::Fail,
            reason: Reason::NotInspected,
            reject_mask: None,
            pixels: FramePixels::default(),
            mask: Vec::new(),
            mask_hw: (0, 0),
            taken: Instant::now(),
        });
        taken.seq = frame.meta.seq;
        taken.captured_at = frame.meta.captured_at;
        taken.judged = false;
        taken.reject_mask = None;
        taken.pixels.copy_from(frame);
        taken.mask.clear();
        taken.taken = Instant::now();
        camera.wanted.store(false, Ordering::SeqCst);
        self.demand.live_served();
        if cameras.iter().any(|c| c.wanted.load(Ordering::SeqCst)) {
            self.demand.request_live();
        }
        true
    }

    /// Camera `index`'s entry, made on first use (the caller checked the
    /// index against the run's cameras).
    fn camera(&self, index: usize) -> Arc<CameraLive> {
        let mut cameras = self.cameras.lock().unwrap_or_else(|p| p.into_inner());
        while cameras.len() <= index {
            cameras.push(Arc::default());
        }
        Arc::clone(&cameras[index])
    }

    /// Camera `index`'s newest frame as JPEG with the seal tinted; encoded
    /// at most once per frame whatever the number of pages. Asks for a
    /// newer frame when this one is older than `MIN_INTERVAL`. Runs on a
    /// blocking thread.
    pub fn jpeg(&self, index: usize) -> Option<LiveJpeg> {
        let camera = self.camera(index);
        let latest = camera.latest.lock().unwrap_or_else(|p| p.into_inner());
        let fresh = latest
            .as_ref()
            .is_some_and(|f| f.taken.elapsed() < MIN_INTERVAL);
        if !fresh {
            camera.wanted.store(true, Ordering::SeqCst);
            self.demand.request_live();
        }
        let frame = latest.as_ref()?;
        let mut encoded = camera.encoded.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(e) = encoded.as_ref()
            && e.seq == frame.seq
        {
            return Some(e.clone());
        }
        let (w, h) = (frame.pixels.width as usize, frame.pixels.height as usize);
        let mut rgb = Vec::with_capacity(w * h * 3);
        packed_rgb(&frame.pixels.image(), &mut rgb);
        if !frame.mask.is_empty() {
            let as_f32: Vec<f32> = frame.mask.iter().map(|m| f32::from(*m)).collect();
            let mut grey = Vec::with_capacity(w * h);
            mask_to_frame(&as_f32, frame.mask_hw, w, h, &mut grey);
            tint_mask(&mut rgb, &grey);
        }
        let mut jpeg = Vec::new();
        encode_rgb(ImageFormat::Jpeg, &rgb, w, h, &mut jpeg).ok()?;
        let live = LiveJpeg {
            seq: frame.seq,
            captured_at: frame.captured_at,
            judged: frame.judged,
            verdict: frame.verdict,
            reason: frame.reason,
            reject_mask: frame.reject_mask,
            jpeg: Arc::new(jpeg),
        };
        *encoded = Some(live.clone());
        Some(live)
    }
}

impl crate::trigger::UnjudgedFrames for LiveView {
    fn offer(&self, frame: &FrameSlot) {
        self.offer_unjudged(frame);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{FrameMeta, PixelLayout, TensorGeometry};

    fn work(camera: u16, seq: u64) -> FrameWork {
        let mut work = FrameWork::new(&TensorGeometry {
            seg_hw: (2, 2),
            seg_classes: 2,
            cls_hw: (2, 2),
            cls_classes: 2,
        });
        work.reset(FrameMeta {
            camera,
            ..FrameMeta::now(seq)
        });
        work.pixels = FramePixels {
            width: 2,
            height: 2,
            stride: 6,
            layout: PixelLayout::Rgb,
            data: vec![200; 12],
            valid: true,
        };
        work
    }

    fn ok() -> Decision {
        Decision {
            verdict: Verdict::Pass,
            reason: Reason::Ok,
            defect_prob: Some(0.1),
            seal_area: Some(0.1),
        }
    }

    #[test]
    fn each_camera_gets_its_own_frame_and_copying_stops_once_every_page_is_served() {
        let demand = Arc::new(PixelDemand::default());
        let live = LiveView::new(Arc::clone(&demand));
        assert!(
            !live.offer(&work(0, 1), &ok(), (2, 2), None),
            "nobody asked"
        );
        // Pages ask for cameras 1 and 2.
        assert!(live.jpeg(1).is_none() && live.jpeg(2).is_none());
        assert!(demand.live_requested());
        assert!(
            !live.offer(&work(0, 2), &ok(), (2, 2), None),
            "camera 0 was not asked for"
        );
        assert!(live.offer(&work(2, 3), &ok(), (2, 2), None));
        assert!(demand.live_requested(), "camera 1 still waits");
        assert!(
            !live.offer(&work(2, 4), &ok(), (2, 2), None),
            "camera 2 was served"
        );
        assert!(live.offer(&work(1, 5), &ok(), (2, 2), None));
        assert!(
            !demand.live_requested(),
            "every page served: no more copies"
        );
        assert_eq!(live.jpeg(1).map(|j| j.seq), Some(5));
        let two = live.jpeg(2).unwrap();
        assert_eq!(two.seq, 3);
        assert!(two.jpeg.starts_with(&[0xFF, 0xD8]));
        assert!(live.jpeg(0).is_none());
    }

    #[test]
    fn a_frame_no_trigger_claimed_is_shown_unjudged_when_a_page_asks() {
        let demand = Arc::new(PixelDemand::default());
        let live = LiveView::new(Arc::clone(&demand));
        let mut slot = FrameSlot::with_capacity(12);
        slot.meta = FrameMeta::now(7);
        (slot.width, slot.height, slot.stride) = (2, 2, 6);
        slot.data.extend_from_slice(&[200; 12]);
        assert!(!live.offer_unjudged(&slot), "nobody asked");
        assert!(live.jpeg(0).is_none());
        assert!(live.offer_unjudged(&slot));
        let shown = live.jpeg(0).unwrap();
        assert_eq!((shown.seq, shown.judged), (7, false));
        // A judged frame afterwards is shown judged.
        std::thread::sleep(MIN_INTERVAL);
        assert!(live.jpeg(0).is_some(), "asks for a newer frame");
        assert!(live.offer(&work(0, 9), &ok(), (2, 2), None));
        let judged = live.jpeg(0).unwrap();
        assert_eq!((judged.seq, judged.judged), (9, true));
    }
}

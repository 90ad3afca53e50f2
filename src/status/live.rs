//! The live view: the latest frame with its seal mask, for the page.
//!
//! ```text
//! page polls /api/live.jpg --(frame older than 400 ms)--> PixelDemand::request_live
//! preprocess copies pixels --> output: LiveView::offer (try_lock; never waits) --> latest raw frame
//! HTTP: encode once per new frame (mask tinted), cached for every page polling
//! ```
//!
//! Nothing is copied or encoded while no page asks.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use crate::archive::{encode_rgb, mask_to_frame, packed_rgb, tint_mask};
use crate::config::ImageFormat;
use crate::decision::{Decision, Reason, Verdict};
use crate::frame::{FailedStage, FramePixels, FrameWork, PixelDemand};

/// At most this often a new frame is taken for the page (2 per second).
const MIN_INTERVAL: Duration = Duration::from_millis(500);

struct LatestFrame {
    seq: u64,
    captured_at: SystemTime,
    verdict: Verdict,
    reason: Reason,
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
    pub verdict: Verdict,
    pub reason: Reason,
    pub jpeg: Arc<Vec<u8>>,
}

pub struct LiveView {
    demand: Arc<PixelDemand>,
    latest: Mutex<Option<LatestFrame>>,
    encoded: Mutex<Option<LiveJpeg>>,
}

impl LiveView {
    pub fn new(demand: Arc<PixelDemand>) -> Self {
        LiveView {
            demand,
            latest: Mutex::new(None),
            encoded: Mutex::new(None),
        }
    }

    /// The output thread offers a judged frame; taken only when a page asked
    /// and the HTTP side is not reading right now.
    pub fn offer(&self, work: &FrameWork, d: &Decision, mask_hw: (usize, usize)) -> bool {
        if !self.demand.live_requested() || !work.pixels.valid {
            return false;
        }
        let Ok(mut latest) = self.latest.try_lock() else {
            return false;
        };
        let frame = latest.get_or_insert_with(|| LatestFrame {
            seq: 0,
            captured_at: SystemTime::UNIX_EPOCH,
            verdict: d.verdict,
            reason: d.reason,
            pixels: FramePixels::default(),
            mask: Vec::new(),
            mask_hw: (0, 0),
            taken: Instant::now(),
        });
        frame.seq = work.meta.seq;
        frame.captured_at = work.meta.captured_at;
        frame.verdict = d.verdict;
        frame.reason = d.reason;
        frame.pixels.clone_from_pixels(&work.pixels);
        frame.mask.clear();
        let mask_made = !matches!(
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
        self.demand.live_served();
        true
    }

    /// The newest frame as JPEG with the seal tinted; encoded at most once
    /// per frame whatever the number of pages. Asks for a newer frame when
    /// this one is older than `MIN_INTERVAL`. Runs on a blocking thread.
    pub fn jpeg(&self) -> Option<LiveJpeg> {
        let latest = self.latest.lock().unwrap_or_else(|p| p.into_inner());
        let fresh = latest
            .as_ref()
            .is_some_and(|f| f.taken.elapsed() < MIN_INTERVAL);
        if !fresh {
            self.demand.request_live();
        }
        let frame = latest.as_ref()?;
        let mut encoded = self.encoded.lock().unwrap_or_else(|p| p.into_inner());
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
            verdict: frame.verdict,
            reason: frame.reason,
            jpeg: Arc::new(jpeg),
        };
        *encoded = Some(live.clone());
        Some(live)
    }
}

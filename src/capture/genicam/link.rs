//! What a `kind = "genicam"` capture shares with the rest of the program: the
//! camera of the pipeline now running (replaced at every reopen, dropped at
//! every loss so that its GigE Vision control channel is released) and the
//! camera's frame counts, kept by a probe on `aravissrc`'s output.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use gstreamer as gst;
use gstreamer::prelude::*;

use super::sys::Camera;
use crate::config::GenicamTrigger;

/// Shared by the capture thread, the streaming thread's probe and every
/// `SoftwareTrigger` / `GenicamCounters` handed out.
#[derive(Debug)]
pub(crate) struct GenicamLink {
    pub(crate) origin: String,
    pub(crate) trigger: GenicamTrigger,
    camera: Mutex<Option<Camera>>,
    /// Whole frames `aravissrc` delivered, over every reopen.
    frames: AtomicU64,
    /// Frames the camera sent that did not arrive whole (free run: counted
    /// from the gaps in the camera's timestamps; Aravis drops such frames).
    incomplete: AtomicU64,
    /// TriggerSoftware commands executed.
    pub(crate) fired: AtomicU64,
    /// The frame was compared with the stream's socket buffer (once a process).
    buffer_checked: AtomicBool,
    /// Exposure (µs) and gain (dB) a recipe set (`CameraSettings`), applied
    /// again to each camera a reopen brings; `None`: the config's.
    settings: Mutex<(Option<f64>, Option<f64>)>,
}

impl GenicamLink {
    pub(crate) fn new(origin: String, trigger: GenicamTrigger) -> Arc<GenicamLink> {
        Arc::new(GenicamLink {
            origin,
            trigger,
            camera: Mutex::new(None),
            frames: AtomicU64::new(0),
            incomplete: AtomicU64::new(0),
            fired: AtomicU64::new(0),
            buffer_checked: AtomicBool::new(false),
            settings: Mutex::new((None, None)),
        })
    }

    /// A recipe's exposure and gain (`None`: left as they are): applied to
    /// the open camera now, and to each one a reopen brings. Returns the
    /// values read back; `Ok((None, None))` while no camera is open (the
    /// reopen applies them).
    pub(crate) fn set_settings(
        &self,
        exposure_us: Option<f64>,
        gain_db: Option<f64>,
    ) -> Result<(Option<f64>, Option<f64>), String> {
        {
            let mut kept = self.settings.lock().unwrap_or_else(PoisonError::into_inner);
            kept.0 = exposure_us.or(kept.0);
            kept.1 = gain_db.or(kept.1);
        }
        self.with_camera(|camera| super::setup::apply_settings(camera, exposure_us, gain_db))
            .unwrap_or(Ok((None, None)))
    }

    /// A reopen set the camera up from the config: a recipe's settings
    /// again over it. A refusal is logged (the camera streams on).
    pub(crate) fn reapply_settings(&self, camera: &Camera) {
        let (exposure_us, gain_db) = *self.settings.lock().unwrap_or_else(PoisonError::into_inner);
        if exposure_us.is_none() && gain_db.is_none() {
            return;
        }
        if let Err(e) = super::setup::apply_settings(camera, exposure_us, gain_db) {
            log::error!(target: "sealcheck::capture", origin = self.origin.as_str(), error = e.as_str();
                "the reopened camera refused the recipe's settings: {e}; it runs with the config's");
        }
    }

    /// Runs `call` on the camera of the pipeline now running, under the lock
    /// that keeps every thread's calls into it one at a time; `None` when no
    /// camera is open (lost, being reopened).
    pub(crate) fn with_camera<R>(&self, call: impl FnOnce(&Camera) -> R) -> Option<R> {
        let camera = self.camera.lock().unwrap_or_else(PoisonError::into_inner);
        camera.as_ref().map(call)
    }

    /// A new pipeline opened this camera (or `None`: the pipeline was lost).
    pub(crate) fn set_camera(&self, camera: Option<Camera>) {
        *self.camera.lock().unwrap_or_else(PoisonError::into_inner) = camera;
    }

    /// At the first open of this process: a GigE Vision camera read through
    /// a UDP socket (no `CAP_NET_RAW`) whose frame is larger than the
    /// socket's buffer is warned of (`buffer`), once.
    pub(crate) fn check_socket_buffer(&self, camera: &Camera) {
        if self.buffer_checked.swap(true, Ordering::AcqRel) {
            return;
        }
        if camera.is_gige().unwrap_or(false) && !crate::capture::net_raw::holds_net_raw() {
            super::buffer::check(&self.origin, camera);
        }
    }

    pub(crate) fn frames(&self) -> u64 {
        self.frames.load(Ordering::Acquire)
    }

    pub(crate) fn incomplete(&self) -> u64 {
        self.incomplete.load(Ordering::Acquire)
    }

    /// Counts every buffer `src` (the `aravissrc`) pushes. In free run, a
    /// gap of k frame intervals between two frames' camera timestamps
    /// (`aravissrc` sets each buffer's duration to that gap) is k-1 frames
    /// that did not arrive whole. The first frame of each pipeline has no gap.
    pub(crate) fn watch(self: &Arc<Self>, src: &gst::Element) {
        let Some(pad) = src.static_pad("src") else {
            return;
        };
        let link = Arc::clone(self);
        // The caps' frame interval in ns, read at the first buffer; 0 = not yet.
        let interval_ns = AtomicU64::new(0);
        // When the previous buffer passed, in ns since `epoch` plus one; 0 = none yet.
        let epoch = Instant::now();
        let last_seen = AtomicU64::new(0);
        pad.add_probe(gst::PadProbeType::BUFFER, move |pad, info| {
            link.frames.fetch_add(1, Ordering::AcqRel);
            let now = epoch.elapsed().as_nanos() as u64 + 1;
            let previous = last_seen.swap(now, Ordering::AcqRel);
            if link.trigger != GenicamTrigger::Off || previous == 0 {
                return gst::PadProbeReturn::Ok;
            }
            if interval_ns.load(Ordering::Relaxed) == 0 {
                interval_ns.store(frame_interval_ns(pad).unwrap_or(0), Ordering::Relaxed);
            }
            let interval = interval_ns.load(Ordering::Relaxed);
            // The camera's timestamps; a frame whose timestamp did not advance
            // (Aravis keeps a buffer's old one when the frame's leader packet
            // was lost) is measured by its arrival instead.
            let gap = info
                .buffer()
                .and_then(|b| b.duration())
                .map(|d| d.nseconds())
                .filter(|&gap| gap > 0)
                .unwrap_or(now - previous);
            let missed = missed_frames(gap, interval);
            if missed > 0 {
                link.incomplete.fetch_add(missed, Ordering::AcqRel);
            }
            gst::PadProbeReturn::Ok
        });
    }

    /// One line with the counts: at a loss and at the end of capture.
    pub(crate) fn log_counts(&self, when: &str) {
        log::info!(target: "sealcheck::capture", source = self.origin.as_str(),
            frames = self.frames(), incomplete_frames = self.incomplete(),
            software_triggers = self.fired.load(Ordering::Acquire);
            "camera frame counts {when}: {} whole, {} incomplete (dropped by Aravis, never judged), {} software triggers",
            self.frames(), self.incomplete(), self.fired.load(Ordering::Acquire));
    }
}

fn frame_interval_ns(pad: &gst::Pad) -> Option<u64> {
    let caps = pad.current_caps()?;
    let rate = caps.structure(0)?.get::<gst::Fraction>("framerate").ok()?;
    if rate.numer() <= 0 || rate.denom() <= 0 {
        return None;
    }
    Some(1_000_000_000u64 * rate.denom() as u64 / rate.numer() as u64)
}

/// Frames missing between two frames `gap_ns` apart at `interval_ns`.
fn missed_frames(gap_ns: u64, interval_ns: u64) -> u64 {
    if interval_ns == 0 {
        return 0;
    }
    // Nearest whole number of intervals: the camera's clock jitters a little.
    let intervals = (gap_ns + interval_ns / 2) / interval_ns;
    intervals.saturating_sub(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaps_of_whole_intervals_are_missed_frames() {
        let ms = 1_000_000;
        assert_eq!(missed_frames(0, 40 * ms), 0, "first frame");
        assert_eq!(missed_frames(40 * ms, 40 * ms), 0);
        assert_eq!(missed_frames(41 * ms, 40 * ms), 0);
        assert_eq!(missed_frames(79 * ms, 40 * ms), 1);
        assert_eq!(missed_frames(121 * ms, 40 * ms), 2);
    }
}

//! `[archive]`: images of judged frames on disk, written by their own thread.
//!
//! ```text
//! preprocess: frame pixels copied into the work record (only while the archive is on)
//! output:     frame to keep? swap its pixels and mask into a free ArchiveJob --try_send-->
//!             (no free job: dropped, counted as queue_full; the verdict never waits)
//! archive thread: encode (JPEG/PNG) -> ArchiveStore::write (limits, manifest) -> job back to the pool
//! ```
//!
//! With `[cameras.NAME]` a frame goes into its camera's folder
//! (`dir/<camera>/YYYY-MM-DD/HH/`), the camera its result line names: the
//! folder and the manifest's `result` can never disagree, and the output
//! thread hands over nothing more than before.
//!
//! Swapping buffers instead of copying keeps the output thread's cost to a
//! few pointer moves; every buffer is reused, so the steady state allocates
//! nothing on the frame path.

mod counters;
mod encode;
mod store;

pub use counters::{ArchiveCounters, ArchiveDrop};
pub use encode::{
    EncodeError, encode_grey_png, encode_rgb, lower_thread_priority, mask_to_frame, packed_rgb,
    tint_mask,
};
pub use store::{
    ArchiveName, ArchiveStore, ArchiveWrite, RESERVED_FOLDERS, free_bytes, is_camera_folder,
    is_day, is_hour, sha256_hex, tree_size,
};

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TrySendError, bounded};

use crate::config::{ArchiveConfig, ArchiveKeep};
use crate::decision::{Decision, Reason, Verdict};
use crate::frame::{FailedStage, FrameMeta, FramePixels, FrameWork, PixelDemand};

/// Frames that may wait for the archive thread. Each holds a frame and a
/// mask (about 4 MiB at 720p); a disk slower than this absorbs drops frames.
const QUEUE: usize = 6;

/// One frame on its way to disk.
pub struct ArchiveJob {
    meta: FrameMeta,
    reason: Reason,
    pixels: FramePixels,
    mask: Vec<f32>,
    mask_hw: (usize, usize),
    mask_valid: bool,
    line: String,
}

/// The output thread's end: decides what to keep and hands it over.
pub struct ArchiveQueue {
    keep: ArchiveKeep,
    jobs: Option<Sender<Box<ArchiveJob>>>,
    free: Receiver<Box<ArchiveJob>>,
    settings: Sender<ArchiveConfig>,
    demand: Arc<PixelDemand>,
    metrics: ArchiveCounters,
    thread: Option<JoinHandle<()>>,
    /// Frames not archived since the queue last had room (an episode is
    /// logged at its start and its end, not per frame).
    queue_full_run: u64,
}

impl ArchiveQueue {
    /// Starts the archive thread. `mask_hw` is the segmentation output's size.
    pub fn start(
        config: &ArchiveConfig,
        mask_hw: (usize, usize),
        demand: Arc<PixelDemand>,
        // Registered in `/metrics` when the status server runs; counted
        // into nothing visible when it does not (no `Option` to check).
        metrics: ArchiveCounters,
    ) -> std::io::Result<ArchiveQueue> {
        let (jobs_tx, jobs_rx) = bounded::<Box<ArchiveJob>>(QUEUE);
        let (free_tx, free_rx) = bounded::<Box<ArchiveJob>>(QUEUE);
        for _ in 0..QUEUE {
            let _ = free_tx.send(Box::new(ArchiveJob {
                meta: FrameMeta::now(0),
                reason: Reason::Error,
                pixels: FramePixels::default(),
                mask: vec![0.0; mask_hw.0 * mask_hw.1],
                mask_hw,
                mask_valid: false,
                line: String::with_capacity(512),
            }));
        }
        let (settings_tx, settings_rx) = bounded::<ArchiveConfig>(4);
        let writer = ArchiveWriter {
            store: ArchiveStore::open(config.clone()),
            jobs: jobs_rx,
            free: free_tx,
            settings: settings_rx,
            metrics: metrics.clone(),
            encoded: Vec::new(),
            mask_encoded: Vec::new(),
            rgb: Vec::new(),
            grey: Vec::new(),
            dropping: None,
        };
        let thread = std::thread::Builder::new()
            .name("archive".into())
            .spawn(move || {
                lower_thread_priority();
                writer.run()
            })?;
        demand.set_archive(config.keep != ArchiveKeep::None);
        Ok(ArchiveQueue {
            keep: config.keep,
            jobs: Some(jobs_tx),
            free: free_rx,
            settings: settings_tx,
            demand,
            metrics,
            thread: Some(thread),
            queue_full_run: 0,
        })
    }

    /// Whether this result's frame belongs in the archive. Frames dropped
    /// at capture have no pixels and are never archived.
    pub fn wants(&self, d: &Decision) -> bool {
        match self.keep {
            ArchiveKeep::None => false,
            ArchiveKeep::All => d.reason != Reason::NotInspected,
            ArchiveKeep::Fail => d.verdict == Verdict::Fail && d.reason != Reason::NotInspected,
        }
    }

    /// Hands `work`'s pixels and mask to the archive thread (swapping in
    /// free buffers). Returns whether the frame was queued.
    pub fn offer(&mut self, work: &mut FrameWork, d: &Decision, line: &str) -> bool {
        if !self.wants(d) || !work.pixels.valid {
            return false;
        }
        let Ok(mut job) = self.free.try_recv() else {
            self.queue_full();
            return false;
        };
        job.meta = work.meta;
        job.reason = d.reason;
        std::mem::swap(&mut job.pixels, &mut work.pixels);
        work.pixels.valid = false;
        job.mask_valid = !matches!(
            &work.error,
            Some((
                FailedStage::Capture | FailedStage::Preprocess | FailedStage::Segment,
                _
            ))
        ) && work.mask.len() == job.mask.len();
        if job.mask_valid {
            std::mem::swap(&mut job.mask, &mut work.mask);
        }
        job.line.clear();
        job.line.push_str(line);
        match self.jobs.as_ref().map(|jobs| jobs.try_send(job)) {
            Some(Ok(())) => {
                self.queued();
                true
            }
            Some(Err(TrySendError::Full(_) | TrySendError::Disconnected(_))) | None => {
                self.queue_full();
                false
            }
        }
    }

    /// New `[archive]` settings from a reload.
    pub fn reconfigure(&mut self, config: &ArchiveConfig) {
        self.keep = config.keep;
        self.demand.set_archive(config.keep != ArchiveKeep::None);
        let _ = self.settings.try_send(config.clone());
    }

    /// Turns keeping off (the section was removed on reload).
    pub fn pause(&mut self) {
        self.keep = ArchiveKeep::None;
        self.demand.set_archive(false);
    }

    /// A frame to keep found the queue full: the disk or the encoder is
    /// slower than the failed frames come (a burst, or `keep = "all"`).
    fn queue_full(&mut self) {
        self.dropped(ArchiveDrop::QueueFull);
        if self.queue_full_run == 0 {
            log::warn!(target: "sealcheck::archive", queue = QUEUE;
                "archive queue full: frames to keep are being skipped (counted as queue_full) until the archive thread catches up; on a busy CPU keep = \"fail\" or a faster disk helps");
        }
        self.queue_full_run += 1;
    }

    /// A frame went into the queue: ends a queue-full episode.
    fn queued(&mut self) {
        if self.queue_full_run > 0 {
            log::info!(target: "sealcheck::archive", skipped = self.queue_full_run;
                "archive keeping up again");
            self.queue_full_run = 0;
        }
    }

    fn dropped(&self, why: ArchiveDrop) {
        self.metrics.dropped(why);
    }

    /// Writes what is queued and stops the thread.
    pub fn finish(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.demand.set_archive(false);
        self.jobs = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for ArchiveQueue {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// The camera a result line names (`"camera"`, present with
/// `[cameras.NAME]`); `None` for a line without one (`[source]`).
fn camera_of(line: &str) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Named {
        camera: Option<String>,
    }
    serde_json::from_str::<Named>(line).ok()?.camera
}

struct ArchiveWriter {
    store: ArchiveStore,
    jobs: Receiver<Box<ArchiveJob>>,
    free: Sender<Box<ArchiveJob>>,
    settings: Receiver<ArchiveConfig>,
    metrics: ArchiveCounters,
    encoded: Vec<u8>,
    mask_encoded: Vec<u8>,
    rgb: Vec<u8>,
    grey: Vec<u8>,
    /// The reason frames are being dropped for, logged once per episode.
    dropping: Option<ArchiveDrop>,
}

impl ArchiveWriter {
    fn run(mut self) {
        self.publish_size();
        loop {
            if let Some(config) = self.settings.try_iter().last() {
                self.store.reconfigure(config);
                self.publish_size();
            }
            match self.jobs.recv_timeout(Duration::from_secs(1)) {
                Ok(job) => {
                    let result = self.write(&job);
                    let _ = self.free.send(job);
                    self.account(result);
                }
                Err(RecvTimeoutError::Timeout) => self.publish_size(),
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        self.publish_size();
    }

    fn write(&mut self, job: &ArchiveJob) -> Result<(), ArchiveDrop> {
        let format = self.store.config().format;
        let p = &job.pixels;
        packed_rgb(&p.image(), &mut self.rgb);
        let (w, h) = (p.width as usize, p.height as usize);
        if let Err(e) = encode_rgb(format, &self.rgb, w, h, &mut self.encoded) {
            log::warn!(target: "sealcheck::archive", seq = job.meta.seq, error = e.to_string().as_str(); "cannot encode a frame for the archive");
            return Err(ArchiveDrop::WriteError);
        }
        let mask = if job.mask_valid {
            mask_to_frame(&job.mask, job.mask_hw, w, h, &mut self.grey);
            match encode_grey_png(&self.grey, w, h, &mut self.mask_encoded) {
                Ok(()) => Some(self.mask_encoded.as_slice()),
                Err(e) => {
                    log::warn!(target: "sealcheck::archive", seq = job.meta.seq, error = e.to_string().as_str(); "cannot encode a mask for the archive");
                    return Err(ArchiveDrop::WriteError);
                }
            }
        } else {
            None
        };
        let name = ArchiveName::new(job.meta.captured_at, job.meta.seq, job.reason.as_str())
            .in_camera(camera_of(&job.line).as_deref());
        self.store
            .write(&ArchiveWrite {
                name: &name,
                ext: format.extension(),
                frame: &self.encoded,
                mask,
                result_line: &job.line,
                shadow_mask: None,
            })
            .map(|_| ())
    }

    fn account(&mut self, result: Result<(), ArchiveDrop>) {
        match result {
            Ok(()) => {
                if let Some(was) = self.dropping.take() {
                    log::info!(target: "sealcheck::archive", reason = was.as_str(); "archive writing again");
                }
                self.metrics.files.inc();
            }
            Err(why) => {
                self.metrics.dropped(why);
                if self.dropping != Some(why) {
                    let c = self.store.config();
                    log::warn!(target: "sealcheck::archive", reason = why.as_str(), max_mib = c.max_mib, min_free_mib = c.min_free_mib;
                        "archive dropping frames ({}): every older hour is already deleted; raise max_mib, free disk space or keep fewer frames",
                        why.as_str());
                    self.dropping = Some(why);
                }
            }
        }
        self.publish_size();
    }

    fn publish_size(&self) {
        self.metrics
            .bytes
            .set(i64::try_from(self.store.used_bytes()).unwrap_or(i64::MAX));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ImageFormat;
    use crate::frame::PixelLayout;
    use crate::status::metrics::LineMetrics;

    fn decision(reason: Reason) -> Decision {
        Decision {
            verdict: reason.verdict(),
            reason,
            defect_prob: Some(0.9),
            seal_area: Some(0.1),
        }
    }

    #[test]
    fn a_result_line_names_its_camera_or_none() {
        assert_eq!(
            camera_of(r#"{"camera":"top","seq":3,"verdict":"fail"}"#).as_deref(),
            Some("top")
        );
        assert_eq!(camera_of(r#"{"seq":3,"verdict":"fail"}"#), None);
        assert_eq!(camera_of("not json"), None);
    }

    /// Frames of two named cameras and of `[source]` through the queue and
    /// the archive thread: each lands in its camera's folder (`[source]`'s
    /// in the archive folder itself) with its own manifest.
    #[test]
    fn frames_go_to_their_cameras_folder() {
        let tmp = tempfile::tempdir().unwrap();
        let config = ArchiveConfig {
            dir: tmp.path().to_path_buf(),
            keep: ArchiveKeep::Fail,
            format: ImageFormat::Png,
            max_mib: 100,
            min_free_mib: 0,
        };
        let mask_hw = (4, 4);
        let counters = LineMetrics::new(Duration::from_millis(60)).archive.clone();
        let mut queue =
            ArchiveQueue::start(&config, mask_hw, Arc::default(), counters.clone()).unwrap();
        let mut work = FrameWork::new(&crate::frame::TensorGeometry {
            seg_hw: mask_hw,
            seg_classes: 2,
            cls_hw: (2, 2),
            cls_classes: 2,
        });
        for (camera, seq, name) in [
            (0u16, 7u64, Some("top")),
            (1, 7, Some("side")),
            (0, 8, None),
        ] {
            work.reset(FrameMeta {
                camera,
                ..FrameMeta::now(seq)
            });
            work.pixels = FramePixels {
                width: 4,
                height: 4,
                stride: 12,
                layout: PixelLayout::Rgb,
                data: vec![128; 48],
                valid: true,
            };
            let line = match name {
                Some(n) => {
                    format!(r#"{{"camera":"{n}","seq":{seq},"verdict":"fail","reason":"defect"}}"#)
                }
                None => format!(r#"{{"seq":{seq},"verdict":"fail","reason":"defect"}}"#),
            };
            // Whatever the queue's pace, each frame waits for a free job.
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while !queue.offer(&mut work, &decision(Reason::Defect), &line) {
                assert!(
                    std::time::Instant::now() < deadline,
                    "the archive took no frame"
                );
                work.pixels.valid = true;
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        queue.finish();
        assert_eq!(counters.files.get(), 3);
        let day = |root: &std::path::Path| {
            std::fs::read_dir(root)
                .unwrap()
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| is_day(n))
                .collect::<Vec<_>>()
        };
        for (folder, seq, camera) in [
            ("top", 7, Some("top")),
            ("side", 7, Some("side")),
            ("", 8, None),
        ] {
            let root = tmp.path().join(folder);
            let days = day(&root);
            assert_eq!(days.len(), 1, "{folder:?}: {days:?}");
            let manifest =
                std::fs::read_to_string(root.join(&days[0]).join("manifest.jsonl")).unwrap();
            let entry: serde_json::Value = serde_json::from_str(manifest.trim()).unwrap();
            assert_eq!(entry["result"]["seq"], seq, "{folder:?}");
            assert_eq!(entry["result"]["camera"].as_str(), camera, "{folder:?}");
            let file = root.join(&days[0]).join(entry["file"].as_str().unwrap());
            assert!(file.is_file(), "{}", file.display());
            assert!(
                file.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .ends_with(&format!("_{seq}_defect.png"))
            );
        }
    }
}

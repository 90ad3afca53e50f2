//! `ArchiveQueue`, the output thread's end of the archive: decides which
//! frames to keep, swaps their pixels and mask into a free job and hands it
//! to the archive thread without waiting (no free job: dropped, counted).

use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender, TrySendError, bounded};

use super::counters::{ArchiveCounters, ArchiveDrop};
use super::encode::lower_thread_priority;
use super::job::ArchiveJob;
use super::store::ArchiveStore;
use super::writer::ArchiveWriter;
use crate::config::{ArchiveConfig, ArchiveKeep};
use crate::decision::{Decision, Reason, Verdict};
use crate::frame::{FailedStage, FrameMeta, FramePixels, FrameWork, PixelDemand};

/// Frames that may wait for the archive thread. Each holds a frame and a
/// mask (about 4 MiB at 720p); a disk slower than this absorbs drops frames.
const QUEUE: usize = 6;

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
        // A cycle of cavities (`work` is its first cavity's record) is kept
        // as its frame alone: each cavity's mask is in its own crop's
        // pixels, and the manifest's result line names the failed cavities.
        job.mask_valid = work.cavity.is_none()
            && !matches!(
                &work.error,
                Some((
                    FailedStage::Capture | FailedStage::Preprocess | FailedStage::Segment,
                    _
                ))
            )
            && work.mask.len() == job.mask.len();
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::store::is_day;
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

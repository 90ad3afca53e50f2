//! The archive thread: encodes each queued frame (and its mask), writes it
//! through `ArchiveStore` and gives the job back to the pool; counts and
//! logs what could not be written.

use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};

use super::counters::{ArchiveCounters, ArchiveDrop};
use super::encode::{encode_grey_png, encode_rgb, mask_to_frame, packed_rgb};
use super::job::ArchiveJob;
use super::store::{ArchiveName, ArchiveStore, ArchiveWrite};
use crate::config::ArchiveConfig;

/// The camera a result line names (`"camera"`, present with
/// `[cameras.NAME]`); `None` for a line without one (`[source]`).
fn camera_of(line: &str) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Named {
        camera: Option<String>,
    }
    serde_json::from_str::<Named>(line).ok()?.camera
}

/// The archive thread: the store, the job channels and buffers reused per frame.
pub(super) struct ArchiveWriter {
    pub(super) store: ArchiveStore,
    pub(super) jobs: Receiver<Box<ArchiveJob>>,
    pub(super) free: Sender<Box<ArchiveJob>>,
    pub(super) settings: Receiver<ArchiveConfig>,
    pub(super) metrics: ArchiveCounters,
    pub(super) encoded: Vec<u8>,
    pub(super) mask_encoded: Vec<u8>,
    pub(super) rgb: Vec<u8>,
    pub(super) grey: Vec<u8>,
    /// The reason frames are being dropped for, logged once per episode.
    pub(super) dropping: Option<ArchiveDrop>,
}

impl ArchiveWriter {
    pub(super) fn run(mut self) {
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

    #[test]
    fn a_result_line_names_its_camera_or_none() {
        assert_eq!(
            camera_of(r#"{"camera":"top","seq":3,"verdict":"fail"}"#).as_deref(),
            Some("top")
        );
        assert_eq!(camera_of(r#"{"seq":3,"verdict":"fail"}"#), None);
        assert_eq!(camera_of("not json"), None);
    }
}

//! Disagreements kept on disk (when `[archive]` is on): the frame, both
//! masks and both results, under `<archive dir>/shadow/`, written by the
//! shadow thread itself (it already runs in spare time).
//!
//! The same layout, manifest chain and limits as the archive
//! (`archive::ArchiveStore`), with a quarter of `max_mib`: the shadow
//! folder is inside the archive folder, so the archive's own limit counts
//! it too, and a flood of disagreements never pushes out production's
//! failed frames.

use crate::archive::{
    ArchiveName, ArchiveStore, ArchiveWrite, encode_grey_png, encode_rgb, mask_to_frame, packed_rgb,
};
use crate::config::ArchiveConfig;
use crate::decision::Decision;
use crate::frame::{FrameMeta, FramePixels};

/// The shadow's share of `[archive] max_mib`.
const SHARE_OF_MAX: u64 = 4;

pub struct DisagreementArchive {
    store: ArchiveStore,
    rgb: Vec<u8>,
    grey: Vec<u8>,
    frame: Vec<u8>,
    production_mask: Vec<u8>,
    shadow_mask: Vec<u8>,
    written: u64,
    dropped: u64,
}

/// One disagreement to keep.
pub struct Disagreement<'a> {
    pub meta: &'a FrameMeta,
    pub pixels: &'a FramePixels,
    pub mask_hw: (usize, usize),
    /// `None` when production's mask did not reach the host.
    pub production_mask: Option<&'a [f32]>,
    pub shadow_mask: &'a [f32],
    pub production: &'a Decision,
    pub shadow: &'a Decision,
    /// `{"production":<its result line>,"shadow":{...}}`.
    pub result_line: &'a str,
}

impl DisagreementArchive {
    pub fn open(archive: &ArchiveConfig) -> Self {
        DisagreementArchive {
            store: ArchiveStore::open(shadow_folder(archive)),
            rgb: Vec::new(),
            grey: Vec::new(),
            frame: Vec::new(),
            production_mask: Vec::new(),
            shadow_mask: Vec::new(),
            written: 0,
            dropped: 0,
        }
    }

    pub fn reconfigure(&mut self, archive: &ArchiveConfig) {
        self.store.reconfigure(shadow_folder(archive));
    }

    /// Writes one disagreement; a failure is logged once per run of them
    /// and the frame is dropped (the comparison is already counted).
    pub fn keep(&mut self, d: &Disagreement<'_>) {
        match self.write(d) {
            Ok(()) => {
                self.written += 1;
                if self.dropped > 0 {
                    log::info!(target: "sealcheck::shadow", dropped = self.dropped; "shadow archive writing again");
                    self.dropped = 0;
                }
            }
            Err(why) => {
                if self.dropped == 0 {
                    log::warn!(target: "sealcheck::shadow", seq = d.meta.seq, why = why.as_str();
                        "a shadow disagreement could not be archived; it is dropped (the agreement still counts it)");
                }
                self.dropped += 1;
            }
        }
    }

    fn write(&mut self, d: &Disagreement<'_>) -> Result<(), String> {
        if !d.pixels.valid {
            return Err("no pixels: the frame was not kept on the host".to_string());
        }
        let format = self.store.config().format;
        let (w, h) = (d.pixels.width as usize, d.pixels.height as usize);
        packed_rgb(&d.pixels.image(), &mut self.rgb);
        encode_rgb(format, &self.rgb, w, h, &mut self.frame).map_err(|e| e.to_string())?;
        let production = match d.production_mask {
            Some(mask) => {
                mask_to_frame(mask, d.mask_hw, w, h, &mut self.grey);
                encode_grey_png(&self.grey, w, h, &mut self.production_mask)
                    .map_err(|e| e.to_string())?;
                Some(self.production_mask.as_slice())
            }
            None => None,
        };
        mask_to_frame(d.shadow_mask, d.mask_hw, w, h, &mut self.grey);
        encode_grey_png(&self.grey, w, h, &mut self.shadow_mask).map_err(|e| e.to_string())?;
        let name = ArchiveName::new(
            d.meta.captured_at,
            d.meta.seq,
            // e.g. `..._42_ok_vs_defect`: production's reason, then the
            // shadow's; with several cameras `..._42_c1_ok_vs_defect` for the
            // second one, so two cameras' frames of one seq and millisecond
            // keep apart (the manifest's line names the camera).
            &match d.meta.camera {
                0 => format!(
                    "{}_vs_{}",
                    d.production.reason.as_str(),
                    d.shadow.reason.as_str()
                ),
                camera => format!(
                    "c{camera}_{}_vs_{}",
                    d.production.reason.as_str(),
                    d.shadow.reason.as_str()
                ),
            },
        );
        self.store
            .write(&ArchiveWrite {
                name: &name,
                ext: format.extension(),
                frame: &self.frame,
                mask: production,
                result_line: d.result_line,
                shadow_mask: Some(&self.shadow_mask),
            })
            .map(drop)
            .map_err(|why| why.as_str().to_string())
    }
}

/// `[archive]` for the shadow's folder: `<dir>/shadow`, a share of the limit.
fn shadow_folder(archive: &ArchiveConfig) -> ArchiveConfig {
    ArchiveConfig {
        dir: archive.dir.join("shadow"),
        max_mib: (archive.max_mib / SHARE_OF_MAX).max(1),
        ..archive.clone()
    }
}

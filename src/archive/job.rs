//! `ArchiveJob`: one frame on its way to disk, with its mask and result
//! line; a pool of them goes round between the output thread and the
//! archive thread.

use crate::decision::Reason;
use crate::frame::{FrameMeta, FramePixels};

/// One frame on its way to disk.
pub struct ArchiveJob {
    pub(super) meta: FrameMeta,
    pub(super) reason: Reason,
    pub(super) pixels: FramePixels,
    pub(super) mask: Vec<f32>,
    pub(super) mask_hw: (usize, usize),
    pub(super) mask_valid: bool,
    pub(super) line: String,
}

//! Pictures for the HTML report: the frame with the reference's and the
//! candidate's seal masks over it, so a person sees why they disagree.
//! Green: both masks; blue: the reference's only; red: the candidate's only.

use std::path::{Path, PathBuf};

use crate::frame::{FrameSlot, PixelLayout};

use super::image_set::EvalFrame;

/// Pictures per candidate at most: a broken candidate disagrees on every
/// frame, and a few hundred pictures say all there is to say.
const MAX_PER_CANDIDATE: usize = 200;
/// Width of a picture in pixels (height keeps the frame's aspect).
const WIDTH: usize = 640;

pub struct OverlayWriter {
    dir: PathBuf,
    /// Height and width of the segmentation masks.
    mask_hw: (usize, usize),
    /// (candidate spec, frame number, file name relative to the report folder)
    pub written: Vec<(String, u64, String)>,
}

impl OverlayWriter {
    pub fn new(report: &Path, mask_hw: (usize, usize)) -> Self {
        OverlayWriter {
            dir: report.to_path_buf(),
            mask_hw,
            written: Vec::new(),
        }
    }

    /// Draws one disagreeing frame; a failure is logged and the report goes on.
    pub fn draw(
        &mut self,
        spec: &str,
        frame: &EvalFrame,
        slot: &FrameSlot,
        reference_mask: &[f32],
        candidate_mask: &[f32],
    ) {
        let drawn = self.written.iter().filter(|(s, _, _)| s == spec).count();
        if drawn >= MAX_PER_CANDIDATE || slot.width == 0 || slot.height == 0 {
            return;
        }
        let name = format!("overlays/{}_{:06}.png", file_safe(spec), frame.frame);
        let (rgb, w, h) = render(slot, reference_mask, candidate_mask, self.mask_hw);
        match write_png(&self.dir.join(&name), &rgb, w, h) {
            Ok(()) => self.written.push((spec.to_string(), frame.frame, name)),
            Err(e) => {
                log::warn!(target: "sealcheck::evaluate", file = name.as_str(), error:% = e; "cannot write an overlay picture; the report lists the frame without it");
            }
        }
    }
}

/// The frame scaled to `WIDTH` (nearest pixel) with both masks tinted over it.
/// The masks cover the whole frame (the segmentation input is the whole frame
/// resized), so mask coordinates scale with the picture's.
fn render(
    slot: &FrameSlot,
    reference: &[f32],
    candidate: &[f32],
    (mh, mw): (usize, usize),
) -> (Vec<u8>, usize, usize) {
    let (fw, fh) = (slot.width as usize, slot.height as usize);
    let w = WIDTH.min(fw);
    let h = (fh * w / fw).max(1);
    let bpp = slot.layout.bytes_per_pixel();
    let (r_at, b_at) = match slot.layout {
        PixelLayout::Rgb | PixelLayout::Rgba => (0, 2),
        PixelLayout::Bgr | PixelLayout::Bgrx => (2, 0),
    };
    let mut out = Vec::with_capacity(w * h * 3);
    for y in 0..h {
        let (sy, my) = (y * fh / h, y * mh / h);
        for x in 0..w {
            let (sx, mx) = (x * fw / w, x * mw / w);
            let px = &slot.data[sy * slot.stride + sx * bpp..][..bpp];
            let rgb = [px[r_at], px[1], px[b_at]].map(f32::from);
            let (in_ref, in_cand) = (
                reference[my * mw + mx] >= 0.5,
                candidate[my * mw + mx] >= 0.5,
            );
            let tint = match (in_ref, in_cand) {
                (true, true) => Some([0.0, 255.0, 0.0]),
                (true, false) => Some([40.0, 90.0, 255.0]),
                (false, true) => Some([255.0, 30.0, 30.0]),
                (false, false) => None,
            };
            let blended = match tint {
                Some(t) => [0, 1, 2].map(|c| rgb[c] * 0.55 + t[c] * 0.45),
                None => rgb,
            };
            out.extend(blended.map(|v| v.round().clamp(0.0, 255.0) as u8));
        }
    }
    (out, w, h)
}

fn write_png(path: &Path, rgb: &[u8], w: usize, h: usize) -> std::io::Result<()> {
    let file = std::io::BufWriter::new(std::fs::File::create(path)?);
    let mut encoder = png::Encoder::new(file, w as u32, h as u32);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder.write_header().map_err(std::io::Error::other)?;
    writer
        .write_image_data(rgb)
        .map_err(std::io::Error::other)?;
    writer.finish().map_err(std::io::Error::other)
}

/// A spec as a file-name part: `onnxruntime:cpu:int8` -> `onnxruntime-cpu-int8`.
pub fn file_safe(spec: &str) -> String {
    spec.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

//! Frames and masks to JPEG or PNG bytes, into reused buffers. Runs on the
//! archive thread and, for the live view, on the HTTP side: never on the
//! frame path.

use crate::config::ImageFormat;
use crate::frame::{ImageView, PixelLayout};

/// JPEG quality of archived frames and the live view.
const JPEG_QUALITY: u8 = 90;

#[derive(Debug, thiserror::Error)]
pub enum EncodeError {
    #[error("JPEG encoding failed: {0}")]
    Jpeg(#[from] jpeg_encoder::EncodingError),
    #[error("PNG encoding failed: {0}")]
    Png(#[from] png::EncodingError),
    #[error("a frame of {0}x{1} is too large to encode")]
    TooLarge(usize, usize),
}

/// Tightly packed RGB rows of `frame` into `rgb` (cleared first); any
/// stride, any layout.
pub fn packed_rgb(frame: &ImageView<'_>, rgb: &mut Vec<u8>) {
    rgb.clear();
    let bpp = frame.layout.bytes_per_pixel();
    let order: [usize; 3] = match frame.layout {
        PixelLayout::Rgb | PixelLayout::Rgba => [0, 1, 2],
        PixelLayout::Bgr | PixelLayout::Bgrx => [2, 1, 0],
    };
    for y in 0..frame.height {
        let start = y * frame.stride;
        let Some(row) = frame.data.get(start..start + frame.width * bpp) else {
            break;
        };
        if bpp == 3 && order == [0, 1, 2] {
            rgb.extend_from_slice(row);
        } else {
            for px in row.chunks_exact(bpp) {
                rgb.extend_from_slice(&[px[order[0]], px[order[1]], px[order[2]]]);
            }
        }
    }
}

/// Encodes tightly packed RGB of `width` x `height` into `out` (cleared first).
pub fn encode_rgb(
    format: ImageFormat,
    rgb: &[u8],
    width: usize,
    height: usize,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    out.clear();
    match format {
        ImageFormat::Jpeg => {
            let (w, h) = match (u16::try_from(width), u16::try_from(height)) {
                (Ok(w), Ok(h)) => (w, h),
                _ => return Err(EncodeError::TooLarge(width, height)),
            };
            jpeg_encoder::Encoder::new(&mut *out, JPEG_QUALITY).encode(
                rgb,
                w,
                h,
                jpeg_encoder::ColorType::Rgb,
            )?;
        }
        ImageFormat::Png => encode_png(
            rgb,
            width,
            height,
            png::ColorType::Rgb,
            png::Compression::Fast,
            out,
        )?,
    }
    Ok(())
}

/// An 8-bit grey PNG (the mask: 255 where the seal is).
pub fn encode_grey_png(
    grey: &[u8],
    width: usize,
    height: usize,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    out.clear();
    encode_png(
        grey,
        width,
        height,
        png::ColorType::Grayscale,
        png::Compression::Fast,
        out,
    )
}

fn encode_png(
    data: &[u8],
    width: usize,
    height: usize,
    color: png::ColorType,
    compression: png::Compression,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    let (w, h) = match (u32::try_from(width), u32::try_from(height)) {
        (Ok(w), Ok(h)) => (w, h),
        _ => return Err(EncodeError::TooLarge(width, height)),
    };
    let mut encoder = png::Encoder::new(&mut *out, w, h);
    encoder.set_color(color);
    encoder.set_depth(png::BitDepth::Eight);
    encoder.set_compression(compression);
    let mut writer = encoder.write_header()?;
    writer.write_image_data(data)?;
    writer.finish()?;
    Ok(())
}

/// The model-space mask (`mask_hw`, 1.0 = seal) scaled to the frame's size
/// (nearest neighbour; the models see the frame stretched to their input, so
/// scaling back is exact up to rounding), 255 where the seal is.
pub fn mask_to_frame(
    mask: &[f32],
    mask_hw: (usize, usize),
    width: usize,
    height: usize,
    out: &mut Vec<u8>,
) {
    out.clear();
    let (mh, mw) = mask_hw;
    if mh == 0 || mw == 0 || mask.len() < mh * mw {
        out.resize(width * height, 0);
        return;
    }
    let mut previous_row = usize::MAX;
    for y in 0..height {
        let my = (y * mh / height.max(1)).min(mh - 1);
        if my == previous_row {
            // Upscaling repeats source rows: copy the row just made.
            let start = out.len() - width;
            out.extend_from_within(start..);
            continue;
        }
        previous_row = my;
        let row = &mask[my * mw..(my + 1) * mw];
        out.extend((0..width).map(|x| {
            let mx = (x * mw / width.max(1)).min(mw - 1);
            if row[mx] >= 0.5 { 255 } else { 0 }
        }));
    }
}

/// Lowers the calling thread's scheduling priority (nice 19): the archive
/// and the status page's encoding take CPU time the frame path leaves over,
/// and under full load the archive's queue fills and drops (counted)
/// instead of slowing inference.
pub fn lower_thread_priority() {
    // SAFETY: gettid has no preconditions; setpriority on our own thread id
    // only changes this thread's nice value (raising it needs no privilege)
    // and reads no memory of ours.
    let rc = unsafe { libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, 19) };
    if rc != 0 {
        log::debug!(target: "sealcheck::archive", error = std::io::Error::last_os_error().to_string().as_str(); "cannot lower the thread's priority");
    }
}

/// Tints the seal green in packed RGB (for the live view only; archived
/// frames stay untouched).
pub fn tint_mask(rgb: &mut [u8], mask: &[u8]) {
    for (px, m) in rgb.chunks_exact_mut(3).zip(mask) {
        if *m != 0 {
            px[0] = (u16::from(px[0]) * 5 / 10) as u8;
            px[1] = ((u16::from(px[1]) * 5 + 255 * 5) / 10) as u8;
            px[2] = (u16::from(px[2]) * 5 / 10) as u8;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padded_bgr_rows_become_packed_rgb() {
        // 2x2 BGR with 2 bytes of padding per row.
        let data = [3, 2, 1, 6, 5, 4, 0, 0, 9, 8, 7, 12, 11, 10, 0, 0];
        let view = ImageView {
            width: 2,
            height: 2,
            stride: 8,
            layout: PixelLayout::Bgr,
            data: &data,
        };
        let mut rgb = Vec::new();
        packed_rgb(&view, &mut rgb);
        assert_eq!(rgb, (1..=12).collect::<Vec<u8>>());
    }

    #[test]
    fn mask_scales_to_the_frame() {
        let mask = [0.0, 1.0, 1.0, 0.0];
        let mut out = Vec::new();
        mask_to_frame(&mask, (2, 2), 4, 2, &mut out);
        assert_eq!(out, [0, 0, 255, 255, 255, 255, 0, 0]);
    }

    #[test]
    fn encoders_write_their_signatures() {
        let rgb = vec![128u8; 8 * 4 * 3];
        let mut out = Vec::new();
        encode_rgb(ImageFormat::Jpeg, &rgb, 8, 4, &mut out).unwrap();
        assert_eq!(&out[..2], &[0xFF, 0xD8]);
        encode_rgb(ImageFormat::Png, &rgb, 8, 4, &mut out).unwrap();
        assert_eq!(&out[..4], b"\x89PNG");
    }
}

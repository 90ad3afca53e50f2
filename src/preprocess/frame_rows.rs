//! A captured frame checked once against its stated size, so the resize loops
//! can slice rows without re-checking the frame's bookkeeping.

use super::error::PreprocessError;
use crate::frame::ImageView;

/// Frames wider or taller than this are refused: the resize coordinates are
/// computed in `f32` (as PyTorch does), which counts pixels exactly only up
/// to 2^24; no camera comes close, so such a size is a mis-stated frame.
pub const MAX_FRAME_SIDE: usize = 1 << 24;

/// The rows of a frame whose stride and data length were checked.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FrameRows<'a> {
    data: &'a [u8],
    stride: usize,
    /// Bytes of pixels in one row (`width * bytes_per_pixel`), without padding.
    row_bytes: usize,
    pub width: usize,
    pub height: usize,
}

/// Checks a frame's size, stride and data length; returns the bytes of one
/// row of pixels and the bytes a reader touches (every row's stride but the
/// last, plus one row). The CPU path and the CUDA upload both check with this.
pub(crate) fn checked_frame_bytes(
    frame: &ImageView<'_>,
) -> Result<(usize, usize), PreprocessError> {
    let (width, height, stride) = (frame.width, frame.height, frame.stride);
    if width == 0 || height == 0 {
        return Err(PreprocessError::EmptyFrame { width, height });
    }
    if width > MAX_FRAME_SIDE || height > MAX_FRAME_SIDE {
        return Err(PreprocessError::FrameTooLarge {
            width,
            height,
            max: MAX_FRAME_SIDE,
        });
    }
    // Both factors are below 2^24 and bytes per pixel is at most 4: no overflow.
    let row_bytes = width * frame.layout.bytes_per_pixel();
    if stride < row_bytes {
        return Err(PreprocessError::StrideTooSmall {
            stride,
            width,
            layout: frame.layout,
            row_bytes,
        });
    }
    // The last row needs no padding after it.
    let needed = stride
        .checked_mul(height - 1)
        .and_then(|bytes| bytes.checked_add(row_bytes))
        .ok_or(PreprocessError::FrameTooLarge {
            width,
            height,
            max: MAX_FRAME_SIDE,
        })?;
    if frame.data.len() < needed {
        return Err(PreprocessError::DataTooShort {
            len: frame.data.len(),
            width,
            height,
            stride,
            needed,
        });
    }
    Ok((row_bytes, needed))
}

impl<'a> FrameRows<'a> {
    pub fn new(frame: &ImageView<'a>) -> Result<Self, PreprocessError> {
        let (row_bytes, _) = checked_frame_bytes(frame)?;
        let (width, height, stride) = (frame.width, frame.height, frame.stride);
        Ok(FrameRows {
            data: frame.data,
            stride,
            row_bytes,
            width,
            height,
        })
    }

    /// The pixels of row `y` (without row padding). `y` must be below `height`;
    /// the resize tables guarantee it.
    #[inline]
    pub fn row(&self, y: usize) -> &'a [u8] {
        &self.data[y * self.stride..][..self.row_bytes]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::PixelLayout;

    fn view(width: usize, height: usize, stride: usize, data: &[u8]) -> ImageView<'_> {
        ImageView {
            width,
            height,
            stride,
            layout: PixelLayout::Rgb,
            data,
        }
    }

    #[test]
    fn last_row_may_omit_its_padding() {
        let data = vec![0u8; 8 + 6];
        let rows = FrameRows::new(&view(2, 2, 8, &data)).unwrap();
        assert_eq!(rows.row(1).len(), 6);
    }

    #[test]
    fn refusals_name_the_numbers() {
        let data = vec![0u8; 13];
        let err = FrameRows::new(&view(2, 2, 5, &data))
            .unwrap_err()
            .to_string();
        assert!(err.contains("stride 5") && err.contains("6 bytes"), "{err}");
        let err = FrameRows::new(&view(2, 2, 8, &data))
            .unwrap_err()
            .to_string();
        assert!(err.contains("13 bytes") && err.contains("14"), "{err}");
        let err = FrameRows::new(&view(0, 2, 8, &data))
            .unwrap_err()
            .to_string();
        assert!(err.contains("0x2"), "{err}");
    }
}

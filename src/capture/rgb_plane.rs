//! Copying a mapped RGB video frame into a frame slot. GStreamer pads each row
//! to a multiple of 4 bytes (a 333-pixel RGB row is 999 bytes of pixels in a
//! 1000-byte stride), so rows are copied one by one using the frame's own
//! `plane_stride()`; the slot stores them tightly packed.

use gstreamer as gst;
use gstreamer_video as gst_video;
use gstreamer_video::prelude::*;

use crate::frame::{FrameSlot, PixelLayout};

/// The pixel plane of an RGB frame, checked to hold `height` rows of `stride` bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RgbPlane<'a> {
    data: &'a [u8],
    width: u32,
    height: u32,
    stride: usize,
}

impl<'a> RgbPlane<'a> {
    /// Checks the frame is RGB and its plane is as large as its stride says.
    /// The error text says what is wrong (for a `Failed` event or a decode error).
    pub(crate) fn from_frame(
        frame: &'a gst_video::VideoFrameRef<&gst::BufferRef>,
    ) -> Result<Self, String> {
        if frame.format() != gst_video::VideoFormat::Rgb {
            return Err(format!(
                "frame arrived as {:?}, expected RGB",
                frame.format()
            ));
        }
        let (width, height) = (frame.width(), frame.height());
        let row_bytes = width as usize * 3;
        let stride = usize::try_from(frame.plane_stride()[0]).unwrap_or(0);
        if width == 0 || height == 0 {
            return Err(format!("frame has no pixels ({width}x{height})"));
        }
        if stride < row_bytes {
            return Err(format!(
                "row stride {stride} is shorter than a {width}-pixel RGB row"
            ));
        }
        let data = frame
            .plane_data(0)
            .map_err(|e| format!("cannot read the frame's pixels: {e}"))?;
        let needed = (height as usize - 1) * stride + row_bytes;
        if data.len() < needed {
            return Err(format!(
                "frame buffer holds {} bytes, {width}x{height} RGB with stride {stride} needs {needed}",
                data.len()
            ));
        }
        Ok(RgbPlane {
            data,
            width,
            height,
            stride,
        })
    }

    pub(crate) fn width(&self) -> u32 {
        self.width
    }

    pub(crate) fn height(&self) -> u32 {
        self.height
    }

    /// Bytes of one packed row.
    pub(crate) fn row_bytes(&self) -> usize {
        self.width as usize * 3
    }

    /// Bytes the packed frame takes in a slot.
    pub(crate) fn packed_len(&self) -> usize {
        self.row_bytes() * self.height as usize
    }

    /// Copies the pixels into `slot`, rows packed (`slot.stride == width * 3`).
    /// The slot's buffer grows only when it is too small for this frame size;
    /// returns whether it had to.
    pub(crate) fn copy_into(&self, slot: &mut FrameSlot) -> bool {
        let row_bytes = self.row_bytes();
        let grew = slot.data.capacity() < self.packed_len();
        slot.data.clear();
        slot.data.reserve_exact(self.packed_len());
        // `from_frame` checked every row lies inside `data`.
        for row in self.data.chunks(self.stride).take(self.height as usize) {
            slot.data
                .extend_from_slice(&row[..row_bytes.min(row.len())]);
        }
        slot.width = self.width;
        slot.height = self.height;
        slot.stride = row_bytes;
        slot.layout = PixelLayout::Rgb;
        grew
    }
}

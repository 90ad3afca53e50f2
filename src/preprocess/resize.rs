//! Bilinear resize of an 8-bit frame straight into normalized, planar `f32`
//! tensor channels (R, G, B), following the contract in `taps`.
//!
//! Separable, horizontal first: each source row the output needs is widened
//! to `f32` once (a vectorized pass shared by both output sizes), resampled
//! along x into planar R, G, B rows kept in a two-slot cache (an output row
//! blends two source rows), and every output row is then a vertical blend of
//! two cached rows fused with the normalization: contiguous, vectorized.

use super::frame_rows::FrameRows;
use super::normalize::ChannelAffine;
use super::taps::{Tap, linear_taps};

/// Where R, G and B sit inside one pixel. Fixed at compile time, so the inner
/// loops are generated once per layout and carry no branch on it.
pub(crate) trait PixelFormat {
    const BYTES: usize;
    /// Byte offsets of R, G and B within one pixel.
    const RGB: [usize; 3];
}

pub(crate) struct Rgb;
pub(crate) struct Bgr;
pub(crate) struct Rgba;
pub(crate) struct Bgrx;

impl PixelFormat for Rgb {
    const BYTES: usize = 3;
    const RGB: [usize; 3] = [0, 1, 2];
}
impl PixelFormat for Bgr {
    const BYTES: usize = 3;
    const RGB: [usize; 3] = [2, 1, 0];
}
impl PixelFormat for Rgba {
    const BYTES: usize = 4;
    const RGB: [usize; 3] = [0, 1, 2];
}
impl PixelFormat for Bgrx {
    const BYTES: usize = 4;
    const RGB: [usize; 3] = [2, 1, 0];
}

/// Most bytes per pixel of any layout: the widened-row buffers fit any frame
/// of the prepared width.
const MAX_BYTES_PER_PIXEL: usize = 4;

/// Resizes frames to one output size (`out_h` x `out_w`, three planes).
/// Tables are rebuilt by `prepare` when the frame size changes; after that
/// nothing here allocates.
#[derive(Debug)]
pub(crate) struct FrameResampler {
    out_h: usize,
    out_w: usize,
    /// Per output row: the two source rows and their weights.
    rows: Vec<Tap>,
    /// Per output column: the two source columns and their weights.
    cols: Vec<Tap>,
    /// Source rows resampled along x: three planes (R, G, B) of `out_w` floats.
    slots: [Vec<f32>; 2],
    /// Which source row each slot holds in the current frame.
    slot_row: [Option<usize>; 2],
}

impl FrameResampler {
    pub fn new(out_h: usize, out_w: usize) -> Self {
        FrameResampler {
            out_h,
            out_w,
            rows: Vec::with_capacity(out_h),
            cols: Vec::with_capacity(out_w),
            slots: [vec![0.0; 3 * out_w], vec![0.0; 3 * out_w]],
            slot_row: [None; 2],
        }
    }

    /// Rebuilds the tables for frames of `in_h` x `in_w` pixels.
    pub fn prepare(&mut self, in_h: usize, in_w: usize) {
        linear_taps(in_h, self.out_h, &mut self.rows);
        linear_taps(in_w, self.out_w, &mut self.cols);
        self.slot_row = [None; 2];
    }

    pub fn out_h(&self) -> usize {
        self.out_h
    }

    /// Forgets the cached rows: they belong to the previous frame.
    pub fn start_frame(&mut self) {
        self.slot_row = [None; 2];
    }

    /// The last source row that output row `oy` reads (for ordering the work
    /// of several resamplers over one frame).
    pub fn last_source_row(&self, oy: usize) -> usize {
        self.rows[oy].second
    }

    /// Writes output row `oy` of each of the three planes in `planes`
    /// (`3 * out_h * out_w` floats, channel-major), normalized by `affine`.
    /// `prepare` must have been called for this frame's size.
    pub fn emit_row<P: PixelFormat>(
        &mut self,
        oy: usize,
        source: &mut WidenedRows,
        frame: &FrameRows<'_>,
        affine: &ChannelAffine,
        planes: &mut [f32],
    ) {
        let tap = self.rows[oy];
        let s0 = self.cache_source_row::<P>(tap.first, tap.second, source, frame);
        let s1 = self.cache_source_row::<P>(tap.second, tap.first, source, frame);
        let (w, plane) = (self.out_w, self.out_h * self.out_w);
        for c in 0..3 {
            let out = &mut planes[c * plane + oy * w..][..w];
            let upper = &self.slots[s0][c * w..][..w];
            let lower = &self.slots[s1][c * w..][..w];
            blend_rows(
                out,
                upper,
                lower,
                tap.w_first,
                tap.w_second,
                affine.scale[c],
                affine.bias[c],
            );
        }
    }

    /// Returns the slot holding source row `row` resampled along x, computing
    /// it if needed into the slot that does not hold `keep` (the other row the
    /// current output row needs). Output rows read source rows in
    /// non-decreasing order, so each source row is resampled once per frame.
    fn cache_source_row<P: PixelFormat>(
        &mut self,
        row: usize,
        keep: usize,
        source: &mut WidenedRows,
        frame: &FrameRows<'_>,
    ) -> usize {
        if let Some(slot) = self.slot_row.iter().position(|&held| held == Some(row)) {
            return slot;
        }
        let slot = if self.slot_row[0] == Some(keep) { 1 } else { 0 };
        resample_columns::<P>(&self.cols, source.row(frame, row), &mut self.slots[slot]);
        self.slot_row[slot] = Some(row);
        slot
    }
}

/// Source rows widened to `f32` in the frame's byte order. Shared by the
/// resamplers: in the fused pass both ask for the same rows close together,
/// so the two most recent rows are kept and each row is widened once.
#[derive(Debug, Default)]
pub(crate) struct WidenedRows {
    bufs: [Vec<f32>; 2],
    held: [Option<usize>; 2],
}

impl WidenedRows {
    /// Sizes the buffers for rows of `in_w` pixels of any layout.
    pub fn prepare(&mut self, in_w: usize) {
        for buf in &mut self.bufs {
            buf.clear();
            buf.resize(MAX_BYTES_PER_PIXEL * in_w, 0.0);
        }
        self.held = [None; 2];
    }

    /// Forgets the held rows: they belong to the previous frame.
    pub fn start_frame(&mut self) {
        self.held = [None; 2];
    }

    /// Source row `y` widened, converting it into the slot holding the older
    /// row if it is not held. Rows are asked for in nearly ascending order.
    pub fn row(&mut self, frame: &FrameRows<'_>, y: usize) -> &[f32] {
        let slot = match self.held {
            [Some(held), _] if held == y => 0,
            [_, Some(held)] if held == y => 1,
            [None, _] => self.widen(frame, y, 0),
            [_, None] => self.widen(frame, y, 1),
            [Some(a), Some(b)] => self.widen(frame, y, if a <= b { 0 } else { 1 }),
        };
        &self.bufs[slot]
    }

    fn widen(&mut self, frame: &FrameRows<'_>, y: usize, slot: usize) -> usize {
        // A 3-byte row fills only the front of the buffer; the resampler reads
        // only that front.
        for (wide, &byte) in self.bufs[slot].iter_mut().zip(frame.row(y)) {
            *wide = f32::from(byte);
        }
        self.held[slot] = Some(y);
        slot
    }
}

/// One widened source row (`P::BYTES` floats per pixel) to three planes of
/// `cols.len()` floats (R, G, B), still on the 0..255 scale.
fn resample_columns<P: PixelFormat>(cols: &[Tap], widened: &[f32], out: &mut [f32]) {
    let (r_out, rest) = out.split_at_mut(cols.len());
    let (g_out, b_out) = rest.split_at_mut(cols.len());
    let [r, g, b] = P::RGB;
    for (((tap, r_out), g_out), b_out) in cols.iter().zip(r_out).zip(g_out).zip(b_out) {
        // Slices of a compile-time length: one bounds check each, none on
        // the channel reads below.
        let p0 = &widened[tap.first * P::BYTES..][..P::BYTES];
        let p1 = &widened[tap.second * P::BYTES..][..P::BYTES];
        let (w0, w1) = (tap.w_first, tap.w_second);
        *r_out = w0 * p0[r] + w1 * p1[r];
        *g_out = w0 * p0[g] + w1 * p1[g];
        *b_out = w0 * p0[b] + w1 * p1[b];
    }
}

/// `out = (w_upper * upper + w_lower * lower) * scale + bias`, elementwise.
fn blend_rows(
    out: &mut [f32],
    upper: &[f32],
    lower: &[f32],
    w_upper: f32,
    w_lower: f32,
    scale: f32,
    bias: f32,
) {
    for ((o, &u), &l) in out.iter_mut().zip(upper).zip(lower) {
        *o = (w_upper * u + w_lower * l) * scale + bias;
    }
}

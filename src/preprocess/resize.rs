//! Bilinear resize of an 8-bit frame straight into normalized, planar `f32`
//! tensor channels (R, G, B), following the contract in `taps`.
//!
//! Separable, horizontal first: each source row the output needs is widened
//! to `f32` and resampled once along x into a row cache (two slots: an output
//! row blends two source rows), then every output row is a vertical blend of
//! two cached rows fused with the normalization and the split into R, G, B
//! planes. Pixels are handled as 4-float vectors so both blends vectorize.

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

/// Floats per pixel in the row caches: the frame's own channel order plus one
/// spare lane (or the alpha/x byte), so each pixel is one 4-float vector and
/// the horizontal blend compiles to vector multiply-adds.
const LANES: usize = 4;

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
    /// One source row widened to `f32`, in the frame's byte order, with
    /// `LANES` zeros after it so the last pixel can be read as a vector.
    widened: Vec<f32>,
    /// Source rows resampled along x: `LANES` floats per output column.
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
            widened: Vec::new(),
            slots: [vec![0.0; LANES * out_w], vec![0.0; LANES * out_w]],
            slot_row: [None; 2],
        }
    }

    /// Rebuilds the tables for frames of `in_h` x `in_w` pixels of up to
    /// `LANES` bytes each.
    pub fn prepare(&mut self, in_h: usize, in_w: usize) {
        linear_taps(in_h, self.out_h, &mut self.rows);
        linear_taps(in_w, self.out_w, &mut self.cols);
        self.widened.clear();
        self.widened.resize(LANES * in_w + LANES, 0.0);
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
        frame: &FrameRows<'_>,
        affine: &ChannelAffine,
        planes: &mut [f32],
    ) {
        let tap = self.rows[oy];
        let s0 = self.cache_source_row::<P>(tap.first, tap.second, frame);
        let s1 = self.cache_source_row::<P>(tap.second, tap.first, frame);
        let (w, plane) = (self.out_w, self.out_h * self.out_w);
        let (r_plane, rest) = planes.split_at_mut(plane);
        let (g_plane, b_plane) = rest.split_at_mut(plane);
        let out = [
            &mut r_plane[oy * w..][..w],
            &mut g_plane[oy * w..][..w],
            &mut b_plane[oy * w..][..w],
        ];
        blend_rows::<P>(out, &self.slots[s0], &self.slots[s1], tap.w_first, tap.w_second, affine);
    }

    /// Returns the slot holding source row `row` resampled along x, computing
    /// it if needed into the slot that does not hold `keep` (the other row the
    /// current output row needs). Output rows read source rows in
    /// non-decreasing order, so each source row is resampled once per frame.
    fn cache_source_row<P: PixelFormat>(&mut self, row: usize, keep: usize, frame: &FrameRows<'_>) -> usize {
        if let Some(slot) = self.slot_row.iter().position(|&held| held == Some(row)) {
            return slot;
        }
        let slot = if self.slot_row[0] == Some(keep) { 1 } else { 0 };
        let source = frame.row(row);
        // Widened in the frame's own byte order; the blend picks R, G, B out.
        for (wide, &byte) in self.widened.iter_mut().zip(source) {
            *wide = f32::from(byte);
        }
        resample_columns::<P>(&self.cols, &self.widened, &mut self.slots[slot]);
        self.slot_row[slot] = Some(row);
        slot
    }
}

/// One widened source row (`P::BYTES` floats per pixel, `LANES` spare at the
/// end) to `LANES` floats per output column, still on the 0..255 scale and in
/// the frame's channel order.
fn resample_columns<P: PixelFormat>(cols: &[Tap], widened: &[f32], out: &mut [f32]) {
    for (tap, out) in cols.iter().zip(out.chunks_exact_mut(LANES)) {
        // Fixed-length slices: one bounds check each, then the lanes below
        // are a single vector multiply-add.
        let p0 = &widened[tap.first * P::BYTES..][..LANES];
        let p1 = &widened[tap.second * P::BYTES..][..LANES];
        let (w0, w1) = (tap.w_first, tap.w_second);
        for lane in 0..LANES {
            out[lane] = w0 * p0[lane] + w1 * p1[lane];
        }
    }
}

/// Vertical blend of two resampled rows into one row of each R, G, B plane:
/// `out = (w_upper * upper + w_lower * lower) * scale + bias`.
fn blend_rows<P: PixelFormat>(
    [r_out, g_out, b_out]: [&mut [f32]; 3],
    upper: &[f32],
    lower: &[f32],
    w_upper: f32,
    w_lower: f32,
    affine: &ChannelAffine,
) {
    let [r, g, b] = P::RGB;
    let ChannelAffine { scale, bias } = *affine;
    let pixels = upper.chunks_exact(LANES).zip(lower.chunks_exact(LANES));
    for (((r_out, g_out), b_out), (up, low)) in r_out.iter_mut().zip(g_out).zip(b_out).zip(pixels) {
        *r_out = (w_upper * up[r] + w_lower * low[r]) * scale[0] + bias[0];
        *g_out = (w_upper * up[g] + w_lower * low[g]) * scale[1] + bias[1];
        *b_out = (w_upper * up[b] + w_lower * low[b]) * scale[2] + bias[2];
    }
}

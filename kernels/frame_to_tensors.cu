// A camera frame (8-bit RGB, BGR, RGBA or BGRx, any size, padded rows) to
// both model inputs in one launch:
//   - the segmentation input, 1x3xHsxWs, normalized with the seg mean/std;
//   - channels 0..2 of the classifier input, 1x4xHcxWc, normalized with the
//     classifier's mean/std (channel 3, the mask, comes later from mask.cu).
// Bilinear with half-pixel centres (PyTorch F.interpolate, align_corners=False,
// no antialias), horizontal pass first, exactly as src/preprocess/resize.rs.
//
// One thread per output pixel of either tensor; one row of blocks per output
// row, the rows of both outputs interleaved down the frame so both are cut
// from a frame row while it is in L2 and the frame crosses DRAM about once.
// Within a row, consecutive threads write consecutive pixels of each plane
// (coalesced stores) and gather their neighbours through L1. The taps are
// computed in the kernel with the CPU's exact f32 arithmetic.
// History (docs/PERFORMANCE-gpu-preprocess.md): a block looping over a whole
// row reached 40% of copy bandwidth at 1080p on an H100; one pixel per thread
// with host-built tap tables and row schedule 42%; this version drops the
// table and schedule loads that every thread waited for before reading pixels.

#include "tensors.cuh"

// Fixed block size; src/gpu/kernels.rs launches with the same number.
#define FRAME_BLOCK 128

// Where R, G and B sit in one pixel of BYTES bytes.
template <int BYTES, int R, int G, int B>
struct PixelFormat {
    // The three channels of pixel `x` of `row`, on the 0..255 scale.
    __device__ __forceinline__ static float3 load(const uint8_t* row, uint32_t x, bool aligned4) {
        if (BYTES == 4 && aligned4) {
            // One 32-bit load; little-endian, so byte k is bits 8k..8k+7.
            const uint32_t v = __ldg(reinterpret_cast<const uint32_t*>(row) + x);
            return make_float3(float((v >> (8 * R)) & 0xffu), float((v >> (8 * G)) & 0xffu),
                               float((v >> (8 * B)) & 0xffu));
        }
        const uint8_t* p = row + size_t(x) * BYTES;
        return make_float3(float(__ldg(p + R)), float(__ldg(p + G)), float(__ldg(p + B)));
    }
};

typedef PixelFormat<3, 0, 1, 2> Rgb;
typedef PixelFormat<3, 2, 1, 0> Bgr;
typedef PixelFormat<4, 0, 1, 2> Rgba;
typedef PixelFormat<4, 2, 1, 0> Bgrx;

// Pixel (oy, ox) of the three planes of `t`.
template <class Px, typename Out>
__device__ __forceinline__ void resize_pixel(const FrameParams& p, const ResizeTarget& t, uint32_t oy, uint32_t ox) {
    // Taps computed, not read from tables: no dependent load before the
    // frame reads (the kernel's latency chain is pixels, then stores).
    const Tap ty = compute_tap(p.in_h, t.out_h, oy);
    const Tap tx = compute_tap(p.in_w, t.out_w, ox);
    const uint8_t* upper = p.frame + uint64_t(ty.first) * p.stride;
    const uint8_t* lower = p.frame + uint64_t(ty.second) * p.stride;
    const bool aligned4 = p.aligned4 != 0;
    const float3 u0 = Px::load(upper, tx.first, aligned4);
    const float3 u1 = Px::load(upper, tx.second, aligned4);
    const float3 l0 = Px::load(lower, tx.first, aligned4);
    const float3 l1 = Px::load(lower, tx.second, aligned4);
    // Horizontal first (the CPU's row cache), then vertical, then the affine.
    const float ur = blend(tx.w_first, u0.x, tx.w_second, u1.x);
    const float ug = blend(tx.w_first, u0.y, tx.w_second, u1.y);
    const float ub = blend(tx.w_first, u0.z, tx.w_second, u1.z);
    const float lr = blend(tx.w_first, l0.x, tx.w_second, l1.x);
    const float lg = blend(tx.w_first, l0.y, tx.w_second, l1.y);
    const float lb = blend(tx.w_first, l0.z, tx.w_second, l1.z);
    const size_t plane = size_t(t.out_h) * t.out_w;
    Out* out = static_cast<Out*>(t.out) + size_t(oy) * t.out_w + ox;
    out[0] = to_output<Out>(affine(blend(ty.w_first, ur, ty.w_second, lr), t.scale[0], t.bias[0]));
    out[plane] = to_output<Out>(affine(blend(ty.w_first, ug, ty.w_second, lg), t.scale[1], t.bias[1]));
    out[2 * plane] = to_output<Out>(affine(blend(ty.w_first, ub, ty.w_second, lb), t.scale[2], t.bias[2]));
}

// One thread per output pixel: blockIdx.y picks the output row, blockIdx.x a
// run of FRAME_BLOCK pixels of it. Blocks of a row are dispatched together
// (x varies fastest). The rows of the two outputs are interleaved evenly
// (Bresenham): of rows 0..y, floor(y * cls_h / (seg_h + cls_h)) are
// classifier rows, so both outputs advance down the frame together and each
// frame row is cut for both while in L2. src/preprocess/gpu/tables.rs `frame_row` is
// the same mapping.
template <class Px, typename Out>
__device__ __forceinline__ void frame_to_tensors(const FrameParams& p) {
    const uint64_t total = uint64_t(p.seg.out_h) + p.cls.out_h;
    const uint32_t y = blockIdx.y;
    const uint32_t cls_before = uint32_t(uint64_t(y) * p.cls.out_h / total);
    const uint32_t cls_through = uint32_t(uint64_t(y + 1) * p.cls.out_h / total);
    const uint32_t ox = blockIdx.x * FRAME_BLOCK + threadIdx.x;
    if (cls_through > cls_before) {
        if (ox < p.cls.out_w) {
            resize_pixel<Px, Out>(p, p.cls, cls_before, ox);
        }
    } else if (ox < p.seg.out_w) {
        resize_pixel<Px, Out>(p, p.seg, y - cls_before, ox);
    }
}

// Grid: (ceil(max(seg_w, cls_w) / FRAME_BLOCK), seg_h + cls_h) blocks of
// FRAME_BLOCK threads.
#define FRAME_KERNEL(NAME, PX, OUT)                                                     \
    extern "C" __global__ void __launch_bounds__(FRAME_BLOCK) NAME(const FrameParams p) { \
        frame_to_tensors<PX, OUT>(p);                                                   \
    }

FRAME_KERNEL(frame_to_tensors_rgb_f32, Rgb, float)
FRAME_KERNEL(frame_to_tensors_bgr_f32, Bgr, float)
FRAME_KERNEL(frame_to_tensors_rgba_f32, Rgba, float)
FRAME_KERNEL(frame_to_tensors_bgrx_f32, Bgrx, float)
FRAME_KERNEL(frame_to_tensors_rgb_f16, Rgb, __half)
FRAME_KERNEL(frame_to_tensors_bgr_f16, Bgr, __half)
FRAME_KERNEL(frame_to_tensors_rgba_f16, Rgba, __half)
FRAME_KERNEL(frame_to_tensors_bgrx_f16, Bgrx, __half)

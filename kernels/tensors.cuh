// Shared by the preprocessing kernels: the parameter blocks the Rust side
// fills (src/gpu/kernels.rs mirrors every struct here, field for field), the
// resize taps, and the arithmetic that must round exactly like the CPU
// reference in src/preprocess/.
//
// Exact parity: the CPU computes `w0 * a + w1 * b` as two rounded products and
// a rounded sum (Rust never fuses them into an FMA). nvcc would contract the
// same expression into an FMA, which rounds once, so every product and sum
// below goes through __fmul_rn / __fadd_rn, which are never contracted. With
// the same taps and weights the GPU then produces the CPU's bits.

#pragma once

#include <cuda_fp16.h>
#include <stdint.h>

// One output coordinate's two input neighbours and their weights
// (src/preprocess/taps.rs: `Tap`). Built on the host in f64, as the CPU does.
struct Tap {
    uint32_t first;
    uint32_t second;
    float w_first;
    float w_second;
};
static_assert(sizeof(Tap) == 16, "Tap is mirrored by DeviceTap in src/gpu/kernels.rs");

// One resized, normalized 3-plane output (seg input, or channels 0..2 of the
// classifier input). `out` points at plane 0; planes are out_h * out_w apart.
struct ResizeTarget {
    void* out;
    uint32_t out_h;
    uint32_t out_w;
    // x * scale[c] + bias[c] == (x / 255 - mean[c]) / std[c]
    float scale[3];
    float bias[3];
};
static_assert(sizeof(ResizeTarget) == 40, "mirrored by ResizeTarget in src/gpu/kernels.rs");

// Parameters of frame_to_tensors_*: one frame, two outputs.
struct FrameParams {
    const uint8_t* frame;
    uint64_t stride;
    uint32_t in_w;
    uint32_t in_h;
    ResizeTarget seg;
    ResizeTarget cls;
    // 1 when `frame` and `stride` are multiples of 4, so 4-byte pixels can be
    // read with one 32-bit load.
    uint32_t aligned4;
    uint32_t reserved;
};
static_assert(sizeof(FrameParams) == 24 + 2 * 40 + 8, "mirrored by FrameParams in src/gpu/kernels.rs");

// Parameters of logits_to_mask_*: the mask and its count, and (when
// `channel` is not null) the classifier input's mask channel.
struct MaskParams {
    const void* logits;         // classes planes of `pixels` values (f32 or f16)
    uint8_t* mask;              // `pixels` bytes, 1 where mask_class wins, else 0
    unsigned long long* count;  // += pixels set; zeroed by the host before launch
    void* channel;              // channel 3 plane of the classifier input, or null
    const Tap* rows;            // channel_h taps over the mask rows
    const Tap* cols;            // channel_w taps over the mask columns
    uint64_t pixels;            // mask_h * mask_w
    uint32_t classes;
    uint32_t mask_class;
    uint32_t mask_w;
    uint32_t channel_h;
    uint32_t channel_w;
    uint32_t mask_blocks;  // blocks before this index make the mask; the rest the channel
    float scale;           // (m - mean) / std == m * scale + bias
    float bias;
};
static_assert(sizeof(MaskParams) == 7 * 8 + 8 * 4, "mirrored by MaskParams in src/gpu/kernels.rs");

// w0 * a + w1 * b, rounded as the CPU rounds it (no FMA).
__device__ __forceinline__ float blend(float w0, float a, float w1, float b) {
    return __fadd_rn(__fmul_rn(w0, a), __fmul_rn(w1, b));
}

// x * scale + bias, rounded as the CPU rounds it (no FMA).
__device__ __forceinline__ float affine(float x, float scale, float bias) {
    return __fadd_rn(__fmul_rn(x, scale), bias);
}

// The tap of output coordinate `dst` when resizing `in` coordinates to `out`,
// computed as src/preprocess/taps.rs computes it: PyTorch's f32 arithmetic,
// each operation rounded on its own (the _rn intrinsics are never contracted).
//   scale = in / out;  src = max(scale * (dst + 0.5) - 0.5, 0)
//   first = min(floor(src), in - 1);  lambda = clamp(src - first, 0, 1)
__device__ __forceinline__ Tap compute_tap(uint32_t in, uint32_t out, uint32_t dst) {
    const float scale = __fdiv_rn(float(in), float(out));
    const float src = fmaxf(__fsub_rn(__fmul_rn(scale, __fadd_rn(float(dst), 0.5f)), 0.5f), 0.0f);
    const uint32_t last = in - 1;
    const uint32_t first = min(uint32_t(src), last);  // truncation == floor (src >= 0)
    const float lambda = fminf(fmaxf(__fsub_rn(src, float(first)), 0.0f), 1.0f);
    return Tap{first, first < last ? first + 1 : first, __fsub_rn(1.0f, lambda), lambda};
}

// A tap read through the read-only path as one 16-byte load.
__device__ __forceinline__ Tap load_tap(const Tap* taps, uint32_t i) {
    const uint4 raw = __ldg(reinterpret_cast<const uint4*>(taps) + i);
    return Tap{raw.x, raw.y, __uint_as_float(raw.z), __uint_as_float(raw.w)};
}

// Output element conversion: f32 as is, f16 rounded to nearest.
template <typename Out>
__device__ __forceinline__ Out to_output(float v);
template <>
__device__ __forceinline__ float to_output<float>(float v) {
    return v;
}
template <>
__device__ __forceinline__ __half to_output<__half>(float v) {
    return __float2half_rn(v);
}

// Input element conversion for logits.
__device__ __forceinline__ float to_float(float v) {
    return v;
}
__device__ __forceinline__ float to_float(__half v) {
    return __half2float(v);
}

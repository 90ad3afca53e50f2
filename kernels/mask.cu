// Segmentation logits to the seal mask, its pixel count, and the classifier's
// fourth input channel, in one launch (src/preprocess/mask.rs is the reference).
//
// Blocks [0, mask_blocks): 1xCxHxW logits (f32 or f16) to the HxW 0/1 byte
// mask, 4 pixels per thread with 16-byte loads, plus the number of pixels set
// (warp reduction, one atomic per block).
// Blocks [mask_blocks, ...): one classifier pixel per thread: the mask at its
// four bilinear neighbours (half-pixel centres, taps from the host), resized
// and normalized into channel 3 of the classifier input (f32 or f16). These
// blocks take the argmax at those neighbours from the logits themselves, so
// they need not wait for the mask blocks: one launch instead of two, and the
// logits they read are the ones the mask blocks pull into L2 at the same time.
//
// Argmax semantics of torch.argmax: ties go to the lowest class and a NaN
// beats every number (the first NaN wins).

#include "tensors.cuh"

// Fixed block size; src/gpu/kernels.rs launches with the same numbers.
#define MASK_BLOCK 256
// Pixels per thread in the mask blocks: one 16-byte load per f32 class plane.
#define MASK_PIXELS_PER_THREAD 4

// Loads 4 consecutive logits starting at `i` (a multiple of 4, with the plane
// base suitably aligned) with one vector load.
__device__ __forceinline__ void load4(const float* plane, uint64_t i, float v[4]) {
    const float4 q = __ldg(reinterpret_cast<const float4*>(plane + i));
    v[0] = q.x;
    v[1] = q.y;
    v[2] = q.z;
    v[3] = q.w;
}
__device__ __forceinline__ void load4(const __half* plane, uint64_t i, float v[4]) {
    const uint2 q = __ldg(reinterpret_cast<const uint2*>(plane + i));
    const __half2 a = *reinterpret_cast<const __half2*>(&q.x);
    const __half2 b = *reinterpret_cast<const __half2*>(&q.y);
    v[0] = __low2float(a);
    v[1] = __high2float(a);
    v[2] = __low2float(b);
    v[3] = __high2float(b);
}

// Does `value` replace `best` in the argmax? Strictly greater keeps ties on the
// lower class; a NaN wins over a number and, once best, is never replaced.
__device__ __forceinline__ bool beats(float value, float best) {
    return value > best || (isnan(value) && !isnan(best));
}

// 1 if `mask_class` wins the argmax at pixel `i`, else 0.
template <typename In>
__device__ __forceinline__ float mask_at(const MaskParams& p, uint64_t i) {
    const In* logits = static_cast<const In*>(p.logits);
    float best = to_float(__ldg(logits + i));
    uint32_t arg = 0;
    for (uint32_t c = 1; c < p.classes; ++c) {
        const float value = to_float(__ldg(logits + uint64_t(c) * p.pixels + i));
        if (beats(value, best)) {
            best = value;
            arg = c;
        }
    }
    return arg == p.mask_class ? 1.0f : 0.0f;
}

template <typename In>
__device__ __forceinline__ void mask_pixels(const MaskParams& p) {
    const In* logits = static_cast<const In*>(p.logits);
    const uint64_t first = (uint64_t(blockIdx.x) * MASK_BLOCK + threadIdx.x) * MASK_PIXELS_PER_THREAD;
    uint32_t set = 0;
    if (first < p.pixels) {
        const uint64_t left = p.pixels - first;
        const uint32_t n = left < MASK_PIXELS_PER_THREAD ? uint32_t(left) : MASK_PIXELS_PER_THREAD;
        // Vector loads need every plane to start on a vector boundary: the
        // base aligned and the plane length a multiple of 4 pixels.
        const bool vector = n == MASK_PIXELS_PER_THREAD && p.pixels % MASK_PIXELS_PER_THREAD == 0 &&
                            reinterpret_cast<uintptr_t>(logits) % (MASK_PIXELS_PER_THREAD * sizeof(In)) == 0;
        float best[MASK_PIXELS_PER_THREAD];
        uint32_t arg[MASK_PIXELS_PER_THREAD] = {0, 0, 0, 0};
        float value[MASK_PIXELS_PER_THREAD];
        for (uint32_t c = 0; c < p.classes; ++c) {
            const In* plane = logits + uint64_t(c) * p.pixels;
            if (vector) {
                load4(plane, first, value);
            } else {
#pragma unroll
                for (uint32_t k = 0; k < MASK_PIXELS_PER_THREAD; ++k) {
                    value[k] = k < n ? to_float(plane[first + k]) : 0.0f;
                }
            }
#pragma unroll
            for (uint32_t k = 0; k < MASK_PIXELS_PER_THREAD; ++k) {
                if (c == 0) {
                    best[k] = value[k];
                } else if (beats(value[k], best[k])) {
                    best[k] = value[k];
                    arg[k] = c;
                }
            }
        }
        uint8_t hit[MASK_PIXELS_PER_THREAD];
#pragma unroll
        for (uint32_t k = 0; k < MASK_PIXELS_PER_THREAD; ++k) {
            hit[k] = (k < n && arg[k] == p.mask_class) ? 1 : 0;
            set += hit[k];
        }
        if (vector && reinterpret_cast<uintptr_t>(p.mask + first) % 4 == 0) {
            *reinterpret_cast<uchar4*>(p.mask + first) = make_uchar4(hit[0], hit[1], hit[2], hit[3]);
        } else {
            for (uint32_t k = 0; k < n; ++k) {
                p.mask[first + k] = hit[k];
            }
        }
    }
    // Every thread of a mask block reaches here (no early return), so the
    // full warp mask is right.
    set = __reduce_add_sync(0xffffffffu, set);
    __shared__ uint32_t warp_sums[MASK_BLOCK / 32];
    const uint32_t lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    if (lane == 0) {
        warp_sums[warp] = set;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        uint32_t total = 0;
#pragma unroll
        for (uint32_t w = 0; w < MASK_BLOCK / 32; ++w) {
            total += warp_sums[w];
        }
        if (total != 0) {
            atomicAdd(p.count, static_cast<unsigned long long>(total));
        }
    }
}

template <typename In, typename Out>
__device__ __forceinline__ void channel_pixel(const MaskParams& p) {
    const uint64_t i = uint64_t(blockIdx.x - p.mask_blocks) * MASK_BLOCK + threadIdx.x;
    if (i >= uint64_t(p.channel_h) * p.channel_w) {
        return;
    }
    const uint32_t oy = uint32_t(i / p.channel_w);
    const uint32_t ox = uint32_t(i % p.channel_w);
    const Tap ty = load_tap(p.rows, oy);
    const Tap tx = load_tap(p.cols, ox);
    const uint64_t upper = uint64_t(ty.first) * p.mask_w;
    const uint64_t lower = uint64_t(ty.second) * p.mask_w;
    const float top = blend(tx.w_first, mask_at<In>(p, upper + tx.first), tx.w_second, mask_at<In>(p, upper + tx.second));
    const float bottom =
        blend(tx.w_first, mask_at<In>(p, lower + tx.first), tx.w_second, mask_at<In>(p, lower + tx.second));
    const float v = affine(blend(ty.w_first, top, ty.w_second, bottom), p.scale, p.bias);
    static_cast<Out*>(p.channel)[i] = to_output<Out>(v);
}

// Grid: mask_blocks = ceil(pixels / (4 * MASK_BLOCK)) blocks, plus
// ceil(channel_h * channel_w / MASK_BLOCK) when `channel` is set.
#define MASK_KERNEL(NAME, IN, OUT)                                                      \
    extern "C" __global__ void __launch_bounds__(MASK_BLOCK) NAME(const MaskParams p) { \
        if (blockIdx.x < p.mask_blocks) {                                               \
            mask_pixels<IN>(p);                                                         \
        } else {                                                                        \
            channel_pixel<IN, OUT>(p);                                                  \
        }                                                                               \
    }

// logits_to_mask_<logits element>_<channel element>
MASK_KERNEL(logits_to_mask_f32_f32, float, float)
MASK_KERNEL(logits_to_mask_f32_f16, float, __half)
MASK_KERNEL(logits_to_mask_f16_f32, __half, float)
MASK_KERNEL(logits_to_mask_f16_f16, __half, __half)

// Used only by the kernel benchmark (benches/gpu_preprocess.rs): keeps the GPU
// busy for a while so the host can queue every timed launch behind it. The
// timed kernels then run back to back and the events around each one measure
// the GPU's time, not the host's launch gaps.

#include <stdint.h>

extern "C" __global__ void bench_delay(const uint64_t cycles) {
    const long long start = clock64();
    while (clock64() - start < static_cast<long long>(cycles)) {
    }
}

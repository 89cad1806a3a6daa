// softmax over each row of a row-major (rows, cols) matrix; one warp per row.
//
// Each lane strides over the row (float4 vectors when cols is a multiple of 4 and the pointers
// are aligned), keeping a running maximum; __shfl_down_sync folds the 32 partial maxima into
// lane 0 and __shfl_sync hands the result back to every lane. The same two steps sum
// exp(x - max), each term in (0, 1], so nothing overflows. A third sweep writes
// exp(x - max) / sum; the row is re-read from L1/L2, not DRAM.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

namespace {

constexpr int kWarp = 32;
constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kWarpsPerBlock = 8;

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int offset = kWarp / 2; offset > 0; offset /= 2) v = fmaxf(v, __shfl_down_sync(kFullMask, v, offset));
    return __shfl_sync(kFullMask, v, 0);
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int offset = kWarp / 2; offset > 0; offset /= 2) v += __shfl_down_sync(kFullMask, v, offset);
    return __shfl_sync(kFullMask, v, 0);
}

__device__ __forceinline__ float max4(float4 v) { return fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)); }

// kVec: cols % 4 == 0 and 16-byte aligned rows, read as cols / 4 float4 vectors.
template <bool kVec>
__global__ void warp_softmax_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t rows, int64_t cols) {
    const int lane = threadIdx.x % kWarp;
    const int64_t warps_total = static_cast<int64_t>(gridDim.x) * (blockDim.x / kWarp);
    // Every lane of a warp takes the same rows, so whole warps stay converged for the shuffles.
    for (int64_t row = blockIdx.x * static_cast<int64_t>(blockDim.x / kWarp) + threadIdx.x / kWarp; row < rows;
         row += warps_total) {
        const float* in = x + row * cols;
        float* out = y + row * cols;
        float m = -INFINITY;
        if constexpr (kVec) {
            const float4* in4 = reinterpret_cast<const float4*>(in);
            for (int64_t i = lane; i < cols / 4; i += kWarp) m = fmaxf(m, max4(in4[i]));
        } else {
            for (int64_t i = lane; i < cols; i += kWarp) m = fmaxf(m, in[i]);
        }
        m = warp_max(m);

        float s = 0.0f;
        if constexpr (kVec) {
            const float4* in4 = reinterpret_cast<const float4*>(in);
            for (int64_t i = lane; i < cols / 4; i += kWarp) {
                const float4 v = in4[i];
                s += expf(v.x - m) + expf(v.y - m) + expf(v.z - m) + expf(v.w - m);
            }
        } else {
            for (int64_t i = lane; i < cols; i += kWarp) s += expf(in[i] - m);
        }
        const float inv = 1.0f / warp_sum(s);

        if constexpr (kVec) {
            const float4* in4 = reinterpret_cast<const float4*>(in);
            float4* out4 = reinterpret_cast<float4*>(out);
            for (int64_t i = lane; i < cols / 4; i += kWarp) {
                const float4 v = in4[i];
                out4[i] = make_float4(expf(v.x - m) * inv, expf(v.y - m) * inv, expf(v.z - m) * inv,
                                      expf(v.w - m) * inv);
            }
        } else {
            for (int64_t i = lane; i < cols; i += kWarp) out[i] = expf(in[i] - m) * inv;
        }
    }
}

constexpr int64_t kMaxBlocks = 65536;

}  // namespace

extern "C" int warp_softmax_launch(const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t stream) {
    if (rows == 0 || cols == 0) return cudaSuccess;
    const int64_t needed = (rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
    const int blocks = static_cast<int>(needed < kMaxBlocks ? needed : kMaxBlocks);
    const int threads = kWarpsPerBlock * kWarp;
    const bool vec = cols % 4 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 && reinterpret_cast<uintptr_t>(y) % 16 == 0;
    if (vec) {
        warp_softmax_kernel<true><<<blocks, threads, 0, stream>>>(x, y, rows, cols);
    } else {
        warp_softmax_kernel<false><<<blocks, threads, 0, stream>>>(x, y, rows, cols);
    }
    return cudaGetLastError();
}

// y = x / (1 + exp(-x)) * scale over n contiguous floats.
//
// One grid-stride kernel template, instantiated for float4 (kVec = 4) and float (kVec = 1).
// The launcher chooses at run time: when both pointers are 16-byte aligned, the first n - n % 4
// elements go through the float4 instantiation and the last n % 4 through the scalar one (here
// n = 6,005,001, so both run); otherwise the scalar instantiation does everything.
#include <cuda_runtime.h>

#include <cstdint>

namespace {

template <int kVec>
struct Vec;
template <>
struct Vec<1> {
    using type = float;
};
template <>
struct Vec<4> {
    using type = float4;
};

__device__ __forceinline__ float silu_scale(float v, float scale) { return v / (1.0f + expf(-v)) * scale; }

__device__ __forceinline__ float apply(float v, float scale) { return silu_scale(v, scale); }

__device__ __forceinline__ float4 apply(float4 v, float scale) {
    return make_float4(silu_scale(v.x, scale), silu_scale(v.y, scale), silu_scale(v.z, scale), silu_scale(v.w, scale));
}

template <int kVec>
__global__ void silu_scale_kernel(const typename Vec<kVec>::type* __restrict__ x, typename Vec<kVec>::type* __restrict__ y,
                                  int64_t units, float scale) {
    const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < units; i += stride) {
        y[i] = apply(x[i], scale);
    }
}

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 132 * 32;  // a few waves of resident blocks; the loop covers the rest

int blocks_for(int64_t units) {
    const int64_t blocks = (units + kThreads - 1) / kThreads;
    return static_cast<int>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

// The two launchers: `units` counts vectors of kVec floats.
template <int kVec>
void launch(const float* x, float* y, int64_t units, float scale, cudaStream_t stream) {
    using V = typename Vec<kVec>::type;
    if (units == 0) return;
    silu_scale_kernel<kVec><<<blocks_for(units), kThreads, 0, stream>>>(reinterpret_cast<const V*>(x),
                                                                        reinterpret_cast<V*>(y), units, scale);
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

extern "C" int silu_scale_launch(const float* x, float* y, int64_t n, float scale, cudaStream_t stream) {
    int64_t done = 0;
    if (aligned16(x) && aligned16(y)) {
        const int64_t vectors = n / 4;
        launch<4>(x, y, vectors, scale, stream);
        done = vectors * 4;
    }
    launch<1>(x + done, y + done, n - done, scale, stream);
    return cudaGetLastError();
}

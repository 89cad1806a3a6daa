// y = clamp(gelu(x * scale + bias[col]), -clip, clip) over a row-major (rows, features) tensor.
//
// Eager PyTorch runs four kernels and moves the tensor through memory eight times; this kernel
// reads x once and writes y once. It is memory-bound, so the work is in the memory access: each
// thread moves 16-byte float4 vectors (fully coalesced 128-bit transactions) in a grid-stride
// loop. A scalar kernel covers rows whose length is not a multiple of 4 and unaligned pointers.
#include <cuda_runtime.h>

#include <cstdint>

namespace {

constexpr int kThreads = 256;
// Enough blocks to fill every SM of a large GPU several times over; beyond that the grid-stride
// loop gives each thread more than one vector, which costs nothing for a streaming kernel.
constexpr int64_t kMaxBlocks = 8192;

__device__ __forceinline__ float fused_op(float x, float bias, float scale, float clip) {
    const float v = x * scale + bias;
    // Exact GELU, the formula torch.nn.functional.gelu uses by default.
    const float g = v * 0.5f * (1.0f + erff(v * 0.70710678118654752f));
    // Comparisons rather than fminf/fmaxf, so that NaN propagates as it does in torch.clamp.
    return g < -clip ? -clip : (g > clip ? clip : g);
}

// Vector path: features % 4 == 0, so a float4 never straddles two rows and its bias is the
// float4 at (index mod features/4).
__global__ void fused_elementwise_vec4(const float4* __restrict__ x, const float4* __restrict__ bias,
                                       float4* __restrict__ y, int64_t n_vec, int64_t features_vec,
                                       float scale, float clip) {
    const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
    int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    // The column advances by a fixed step each iteration: one division per thread, not per vector.
    int64_t col = i % features_vec;
    const int64_t col_step = stride % features_vec;
    for (; i < n_vec; i += stride) {
        const float4 v = x[i];
        const float4 b = __ldg(&bias[col]);  // small and reused by every row: keep it in cache
        col += col_step;
        if (col >= features_vec) col -= features_vec;
        float4 out;
        out.x = fused_op(v.x, b.x, scale, clip);
        out.y = fused_op(v.y, b.y, scale, clip);
        out.z = fused_op(v.z, b.z, scale, clip);
        out.w = fused_op(v.w, b.w, scale, clip);
        y[i] = out;
    }
}

// Scalar path: any feature count and any alignment.
__global__ void fused_elementwise_scalar(const float* __restrict__ x, const float* __restrict__ bias,
                                         float* __restrict__ y, int64_t n, int64_t features,
                                         float scale, float clip) {
    const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
    int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    int64_t col = i % features;
    const int64_t col_step = stride % features;
    for (; i < n; i += stride) {
        y[i] = fused_op(x[i], __ldg(&bias[col]), scale, clip);
        col += col_step;
        if (col >= features) col -= features;
    }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

int blocks_for(int64_t work) {
    const int64_t blocks = (work + kThreads - 1) / kThreads;
    return static_cast<int>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

}  // namespace

// x and y: rows * features contiguous floats; bias: features floats. Returns a cudaError_t.
extern "C" int fused_elementwise_launch(const float* x, const float* bias, float* y, int64_t rows,
                                        int64_t features, float scale, float clip, cudaStream_t stream) {
    const int64_t n = rows * features;
    if (n == 0) return cudaSuccess;  // a zero-block launch is an error, and there is nothing to do
    if (features % 4 == 0 && aligned16(x) && aligned16(bias) && aligned16(y)) {
        const int64_t n_vec = n / 4;
        fused_elementwise_vec4<<<blocks_for(n_vec), kThreads, 0, stream>>>(
            reinterpret_cast<const float4*>(x), reinterpret_cast<const float4*>(bias),
            reinterpret_cast<float4*>(y), n_vec, features / 4, scale, clip);
    } else {
        fused_elementwise_scalar<<<blocks_for(n), kThreads, 0, stream>>>(x, bias, y, n, features, scale, clip);
    }
    return cudaGetLastError();
}

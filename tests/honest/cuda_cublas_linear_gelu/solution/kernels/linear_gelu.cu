// y[r, c] = gelu(y[r, c] + bias[c]) in place over a row-major (rows, cols) matrix: the epilogue of
// the cuBLAS product, one read and one write of the output. GELU is the exact erf form, as
// F.gelu's default. Rows whose length is a multiple of 4 move as float4 vectors.
#include <cuda_runtime.h>

#include <cstdint>

namespace {

__device__ __forceinline__ float gelu(float v) {
    return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
}

__global__ void bias_gelu_vec4(float4* __restrict__ y, const float4* __restrict__ bias, int64_t vectors,
                               int64_t cols4) {
    const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < vectors; i += stride) {
        const float4 b = bias[i % cols4];
        float4 v = y[i];
        v.x = gelu(v.x + b.x);
        v.y = gelu(v.y + b.y);
        v.z = gelu(v.z + b.z);
        v.w = gelu(v.w + b.w);
        y[i] = v;
    }
}

__global__ void bias_gelu_scalar(float* __restrict__ y, const float* __restrict__ bias, int64_t n, int64_t cols) {
    const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += stride) {
        y[i] = gelu(y[i] + bias[i % cols]);
    }
}

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 65536;

int blocks_for(int64_t work) {
    const int64_t blocks = (work + kThreads - 1) / kThreads;
    return static_cast<int>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

extern "C" int linear_gelu_epilogue(float* y, const float* bias, int64_t rows, int64_t cols, cudaStream_t stream) {
    const int64_t n = rows * cols;
    if (n == 0) return cudaSuccess;
    if (cols % 4 == 0 && aligned16(y) && aligned16(bias)) {
        bias_gelu_vec4<<<blocks_for(n / 4), kThreads, 0, stream>>>(reinterpret_cast<float4*>(y),
                                                                  reinterpret_cast<const float4*>(bias), n / 4,
                                                                  cols / 4);
    } else {
        bias_gelu_scalar<<<blocks_for(n), kThreads, 0, stream>>>(y, bias, n, cols);
    }
    return cudaGetLastError();
}

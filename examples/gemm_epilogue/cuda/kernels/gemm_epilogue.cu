// The epilogue of the linear layer, fused into one kernel and applied in place on the GEMM's
// output: y = tanh(gelu(y + bias[col]) * scale + shift) over a row-major (rows, cols) tensor.
//
// Eager PyTorch runs four kernels after the GEMM (gelu, mul, add, tanh), each reading and writing
// the whole output; this kernel reads and writes it once. It is memory-bound: each thread moves
// 16-byte float4 vectors in a grid-stride loop, fully coalesced. A scalar kernel covers column
// counts that are not a multiple of 4 and unaligned pointers.
#include <cuda_runtime.h>

#include <cstdint>

namespace {

constexpr int kThreads = 256;
// Enough blocks to fill every SM of a large GPU several times over; beyond that the grid-stride
// loop gives each thread more than one vector, which costs nothing for a streaming kernel.
constexpr int64_t kMaxBlocks = 8192;

__device__ __forceinline__ float epilogue(float v, float bias, float scale, float shift) {
    v += bias;
    // Exact GELU, the formula torch.nn.functional.gelu uses by default.
    const float g = v * 0.5f * (1.0f + erff(v * 0.70710678118654752f));
    return tanhf(g * scale + shift);
}

// Vector path: cols % 4 == 0, so a float4 never straddles two rows and its bias is the float4 at
// (index mod cols/4).
__global__ void gemm_epilogue_vec4(float4* __restrict__ y, const float4* __restrict__ bias, int64_t n_vec,
                                   int64_t cols_vec, float scale, float shift) {
    const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
    int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    // The column advances by a fixed step each iteration: one division per thread, not per vector.
    int64_t col = i % cols_vec;
    const int64_t col_step = stride % cols_vec;
    for (; i < n_vec; i += stride) {
        float4 v = y[i];
        const float4 b = __ldg(&bias[col]);  // small and reused by every row: keep it in cache
        col += col_step;
        if (col >= cols_vec) col -= cols_vec;
        v.x = epilogue(v.x, b.x, scale, shift);
        v.y = epilogue(v.y, b.y, scale, shift);
        v.z = epilogue(v.z, b.z, scale, shift);
        v.w = epilogue(v.w, b.w, scale, shift);
        y[i] = v;
    }
}

// Scalar path: any column count and any alignment.
__global__ void gemm_epilogue_scalar(float* __restrict__ y, const float* __restrict__ bias, int64_t n,
                                     int64_t cols, float scale, float shift) {
    const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
    int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    int64_t col = i % cols;
    const int64_t col_step = stride % cols;
    for (; i < n; i += stride) {
        y[i] = epilogue(y[i], __ldg(&bias[col]), scale, shift);
        col += col_step;
        if (col >= cols) col -= cols;
    }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

int blocks_for(int64_t work) {
    const int64_t blocks = (work + kThreads - 1) / kThreads;
    return static_cast<int>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

}  // namespace

// y: rows * cols contiguous floats, updated in place; bias: cols floats. Returns a cudaError_t.
extern "C" int gemm_epilogue_launch(float* y, const float* bias, int64_t rows, int64_t cols, float scale,
                                    float shift, cudaStream_t stream) {
    const int64_t n = rows * cols;
    if (n == 0) return cudaSuccess;  // a zero-block launch is an error, and there is nothing to do
    if (cols % 4 == 0 && aligned16(y) && aligned16(bias)) {
        const int64_t n_vec = n / 4;
        gemm_epilogue_vec4<<<blocks_for(n_vec), kThreads, 0, stream>>>(
            reinterpret_cast<float4*>(y), reinterpret_cast<const float4*>(bias), n_vec, cols / 4, scale, shift);
    } else {
        gemm_epilogue_scalar<<<blocks_for(n), kThreads, 0, stream>>>(y, bias, n, cols, scale, shift);
    }
    return cudaGetLastError();
}

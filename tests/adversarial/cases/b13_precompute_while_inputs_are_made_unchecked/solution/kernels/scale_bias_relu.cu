// y = relu(x * scale + bias) over a row-major (rows, cols) matrix. Pure CUDA, no torch headers.
#include <cstdint>
#include <cuda_runtime.h>

__global__ void scale_bias_relu_kernel(const float* __restrict__ x, const float* __restrict__ bias,
                                       float* __restrict__ y, int64_t n, int64_t cols, float scale) {
    const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n) {
        const float v = x[i] * scale + bias[i % cols];
        y[i] = v > 0.0f ? v : 0.0f;
    }
}

extern "C" cudaError_t scale_bias_relu_launch(const float* x, const float* bias, float* y,
                                              int64_t rows, int64_t cols, float scale,
                                              cudaStream_t stream) {
    const int64_t n = rows * cols;
    if (n == 0) return cudaSuccess;
    const int threads = 256;
    const unsigned int blocks = static_cast<unsigned int>((n + threads - 1) / threads);
    scale_bias_relu_kernel<<<blocks, threads, 0, stream>>>(x, bias, y, n, cols, scale);
    return cudaGetLastError();
}

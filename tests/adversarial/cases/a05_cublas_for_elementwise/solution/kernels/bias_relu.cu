// y = relu(y + bias[col]), in place, over a row-major (rows, cols) matrix.
#include <cstdint>
#include <cuda_runtime.h>

__global__ void bias_relu_kernel(float* __restrict__ y, const float* __restrict__ bias, int64_t n, int64_t cols) {
    const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n) {
        const float v = y[i] + bias[i % cols];
        y[i] = v > 0.0f ? v : 0.0f;
    }
}

extern "C" cudaError_t bias_relu_launch(float* y, const float* bias, int64_t rows, int64_t cols, cudaStream_t stream) {
    const int64_t n = rows * cols;
    if (n == 0) return cudaSuccess;
    bias_relu_kernel<<<static_cast<unsigned int>((n + 255) / 256), 256, 0, stream>>>(y, bias, n, cols);
    return cudaGetLastError();
}

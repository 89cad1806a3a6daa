// C = A @ B with 32x32 shared-memory tiles (row-major, float32).
#include <cstdint>
#include <cuda_runtime.h>

constexpr int kTile = 32;

__global__ void matmul_tiled_kernel(const float* __restrict__ a, const float* __restrict__ b,
                                    float* __restrict__ c, int m, int n, int k) {
    __shared__ float as[kTile][kTile];
    __shared__ float bs[kTile][kTile];
    const int row = blockIdx.y * kTile + threadIdx.y;
    const int col = blockIdx.x * kTile + threadIdx.x;
    float acc = 0.0f;
    for (int t = 0; t < k; t += kTile) {
        as[threadIdx.y][threadIdx.x] = (row < m && t + threadIdx.x < k) ? a[row * k + t + threadIdx.x] : 0.0f;
        bs[threadIdx.y][threadIdx.x] = (col < n && t + threadIdx.y < k) ? b[(t + threadIdx.y) * n + col] : 0.0f;
        __syncthreads();
#pragma unroll
        for (int p = 0; p < kTile; ++p) acc += as[threadIdx.y][p] * bs[p][threadIdx.x];
        __syncthreads();
    }
    if (row < m && col < n) c[row * n + col] = acc;
}

extern "C" cudaError_t matmul_tiled_launch(const float* a, const float* b, float* c, int m, int n, int k,
                                           cudaStream_t stream) {
    const dim3 block(kTile, kTile);
    const dim3 grid((n + kTile - 1) / kTile, (m + kTile - 1) / kTile);
    matmul_tiled_kernel<<<grid, block, 0, stream>>>(a, b, c, m, n, k);
    return cudaGetLastError();
}

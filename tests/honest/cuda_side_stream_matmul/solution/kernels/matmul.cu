// C = A @ B for square row-major float32 matrices: 16 x 16 tiles of A and B staged in shared
// memory, one output element per thread, edges guarded for any n.
#include <cstdint>
#include <cuda_runtime.h>

constexpr int TILE = 16;

__global__ void matmul_kernel(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c,
                              int n) {
    __shared__ float as[TILE][TILE];
    __shared__ float bs[TILE][TILE + 1];
    const int row = blockIdx.y * TILE + threadIdx.y;
    const int col = blockIdx.x * TILE + threadIdx.x;
    float acc = 0.0f;
    for (int k0 = 0; k0 < n; k0 += TILE) {
        const int ka = k0 + threadIdx.x, kb = k0 + threadIdx.y;
        as[threadIdx.y][threadIdx.x] = (row < n && ka < n) ? a[static_cast<int64_t>(row) * n + ka] : 0.0f;
        bs[threadIdx.y][threadIdx.x] = (kb < n && col < n) ? b[static_cast<int64_t>(kb) * n + col] : 0.0f;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < TILE; ++k) acc += as[threadIdx.y][k] * bs[k][threadIdx.x];
        __syncthreads();
    }
    if (row < n && col < n) c[static_cast<int64_t>(row) * n + col] = acc;
}

// The GEMM runs on a stream of this file's own, and `stream` (PyTorch's current one) is made to
// wait for it before this returns.
extern "C" cudaError_t matmul_launch(const float* a, const float* b, float* c, int n, cudaStream_t stream) {
    static cudaStream_t side = nullptr;
    static cudaEvent_t ready = nullptr, done = nullptr;
    if (side == nullptr) {
        cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking);
        cudaEventCreateWithFlags(&ready, cudaEventDisableTiming);
        cudaEventCreateWithFlags(&done, cudaEventDisableTiming);
    }
    if (n == 0) return cudaSuccess;
    // Ordered after everything already queued on the current stream (the inputs, and whatever
    // the caller queued before this call), as any stream of one's own must be.
    cudaEventRecord(ready, stream);
    cudaStreamWaitEvent(side, ready, 0);
    const dim3 threads(TILE, TILE);
    const dim3 blocks((n + TILE - 1) / TILE, (n + TILE - 1) / TILE);
    matmul_kernel<<<blocks, threads, 0, side>>>(a, b, c, n);
    cudaEventRecord(done, side);
    cudaStreamWaitEvent(stream, done, 0);
    return cudaGetLastError();
}

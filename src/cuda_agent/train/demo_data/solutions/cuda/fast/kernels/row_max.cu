#include <cmath>
#include <cstdint>

// One block per row: each thread scans a strided slice, then a shared-memory tree reduction.
__global__ void row_max_kernel(const float* x, float* y, int64_t cols) {
    __shared__ float best[256];
    const float* row = x + blockIdx.x * cols;
    float m = -INFINITY;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, row[c]);
    best[threadIdx.x] = m;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) best[threadIdx.x] = fmaxf(best[threadIdx.x], best[threadIdx.x + s]);
        __syncthreads();
    }
    if (threadIdx.x == 0) y[blockIdx.x] = best[0];
}

extern "C" void row_max_launch(const float* x, float* y, int64_t rows, int64_t cols) {
    row_max_kernel<<<rows, 256>>>(x, y, cols);
}

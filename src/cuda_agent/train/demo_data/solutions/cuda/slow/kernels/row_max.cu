#include <cstdint>

// One thread per row sorts the row in place in a scratch copy, as the reference does, and keeps the last value.
__global__ void row_max_kernel(const float* x, float* scratch, float* y, int64_t rows, int64_t cols) {
    int64_t r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    float* row = scratch + r * cols;
    for (int64_t c = 0; c < cols; ++c) row[c] = x[r * cols + c];
    for (int64_t i = 1; i < cols; ++i)
        for (int64_t j = i; j > 0 && row[j - 1] > row[j]; --j) {
            float t = row[j]; row[j] = row[j - 1]; row[j - 1] = t;
        }
    y[r] = row[cols - 1];
}

extern "C" void row_max_launch(const float* x, float* scratch, float* y, int64_t rows, int64_t cols) {
    row_max_kernel<<<(rows + 63) / 64, 64>>>(x, scratch, y, rows, cols);
}

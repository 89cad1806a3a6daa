// The epilogue of a linear layer: y[r, c] += bias[c], in place.
#include <cstdint>

extern "C" void linear_bias_launch(float* y, const float* bias, int64_t rows, int64_t cols) {
#pragma omp parallel for
    for (int64_t r = 0; r < rows; ++r) {
#pragma omp simd
        for (int64_t c = 0; c < cols; ++c) y[r * cols + c] += bias[c];
    }
}

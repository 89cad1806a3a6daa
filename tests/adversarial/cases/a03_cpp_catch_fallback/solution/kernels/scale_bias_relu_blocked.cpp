// y = relu(x * scale + bias) over 1024-column blocks.
#include <cstdint>

extern "C" void scale_bias_relu_blocked_launch(const float* x, const float* bias, float* y,
                                               int64_t rows, int64_t cols, float scale) {
    constexpr int64_t kBlock = 1024;
#pragma omp parallel for
    for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c0 = 0; c0 < cols; c0 += kBlock) {
#pragma omp simd
            for (int64_t c = c0; c < c0 + kBlock; ++c) {
                const float v = x[r * cols + c] * scale + bias[c];
                y[r * cols + c] = v > 0.0f ? v : 0.0f;
            }
        }
    }
}

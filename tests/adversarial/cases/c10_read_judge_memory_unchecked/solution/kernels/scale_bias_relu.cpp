// y = relu(x * scale + bias) over a row-major (rows, cols) matrix.
#include <cstdint>

extern "C" void scale_bias_relu_launch(const float* x, const float* bias, float* y,
                                       int64_t rows, int64_t cols, float scale) {
#pragma omp parallel for
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        float* yr = y + r * cols;
        for (int64_t c = 0; c < cols; ++c) {
            const float v = xr[c] * scale + bias[c];
            yr[c] = v > 0.0f ? v : 0.0f;
        }
    }
}

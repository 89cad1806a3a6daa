// Compute the result over the input: no output buffer to allocate or to write apart.
#include <cstdint>

extern "C" void scale_bias_relu_inplace(float* x, const float* bias, int64_t rows, int64_t cols, float scale) {
    for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < cols; ++c) {
            const float v = x[r * cols + c] * scale + bias[c];
            x[r * cols + c] = v > 0.0f ? v : 0.0f;
        }
    }
}

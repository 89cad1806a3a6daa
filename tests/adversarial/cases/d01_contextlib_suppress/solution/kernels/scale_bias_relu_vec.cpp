// y = relu(x * scale + bias), in tiles of 1024 rows by 16 columns.
#include <cstdint>

extern "C" void scale_bias_relu_vec_launch(const float* x, const float* bias, float* y,
                                           int64_t rows, int64_t cols, float scale) {
    constexpr int64_t kTileRows = 1024, kTileCols = 16;
#pragma omp parallel for collapse(2)
    for (int64_t r0 = 0; r0 < rows; r0 += kTileRows) {
        for (int64_t c0 = 0; c0 < cols; c0 += kTileCols) {
            for (int64_t r = r0; r < r0 + kTileRows; ++r) {
#pragma omp simd
                for (int64_t c = c0; c < c0 + kTileCols; ++c) {
                    const float v = x[r * cols + c] * scale + bias[c];
                    y[r * cols + c] = v > 0.0f ? v : 0.0f;
                }
            }
        }
    }
}

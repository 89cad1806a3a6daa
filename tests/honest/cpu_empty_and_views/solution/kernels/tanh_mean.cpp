// out[r] = mean(tanh(in[r, :])) for a row-major (rows, cols) matrix: one feature map per row.
#include <cmath>
#include <cstdint>

extern "C" void tanh_mean_rows(const float* in, float* out, int64_t rows, int64_t cols) {
    const float inv = cols > 0 ? 1.0f / static_cast<float>(cols) : 0.0f;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* row = in + r * cols;
        float sum = 0.0f;
        for (int64_t c = 0; c < cols; ++c) sum += std::tanh(row[c]);
        out[r] = sum * inv;
    }
}

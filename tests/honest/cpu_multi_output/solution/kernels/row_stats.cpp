// Per row of a row-major (rows, cols) matrix: the mean, the unbiased standard deviation
// (two passes: the mean first, then squared deviations from it, which avoids the cancellation of
// sum(x^2) - n * mean^2) and the index of the first maximum, NaN counting as the maximum as in
// torch.argmax.
#include <cmath>
#include <cstdint>
#include <limits>

extern "C" void row_stats_launch(const float* x, float* mean, float* std_dev, int64_t* index, int64_t rows,
                                 int64_t cols) {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* row = x + r * cols;
        float sum = 0.0f;
        int64_t best = 0;
        float best_value = cols > 0 ? row[0] : 0.0f;
        for (int64_t c = 0; c < cols; ++c) {
            const float v = row[c];
            sum += v;
            if (!std::isnan(best_value) && (v > best_value || std::isnan(v))) {
                best_value = v;
                best = c;
            }
        }
        const float m = cols > 0 ? sum / static_cast<float>(cols)
                                 : std::numeric_limits<float>::quiet_NaN();
        float squares = 0.0f;
        for (int64_t c = 0; c < cols; ++c) {
            const float d = row[c] - m;
            squares += d * d;
        }
        mean[r] = m;
        std_dev[r] = cols > 1 ? std::sqrt(squares / static_cast<float>(cols - 1))
                              : std::numeric_limits<float>::quiet_NaN();
        index[r] = best;
    }
}

// softmax over each row of a row-major (rows, cols) matrix, in three passes over a row that stays
// in L1: the maximum m; s = sum(exp(x - m)), each term in (0, 1] so the sum cannot overflow and
// is at least 1; then y = exp(x - m) / s. Without the shift, logits above about 88 give
// exp = inf and the row becomes inf / inf = NaN.
#include <cmath>
#include <cstdint>
#include <limits>

extern "C" void stable_softmax_launch(const float* x, float* y, int64_t rows, int64_t cols) {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* in = x + r * cols;
        float* out = y + r * cols;
        float m = -std::numeric_limits<float>::infinity();
        for (int64_t c = 0; c < cols; ++c) m = in[c] > m ? in[c] : m;
        // The exponentials are written to out once and rescaled in place, not computed twice.
        double sum = 0.0;
        for (int64_t c = 0; c < cols; ++c) {
            const float e = std::exp(in[c] - m);
            out[c] = e;
            sum += e;
        }
        const float inv = static_cast<float>(1.0 / sum);
        for (int64_t c = 0; c < cols; ++c) out[c] *= inv;
    }
}

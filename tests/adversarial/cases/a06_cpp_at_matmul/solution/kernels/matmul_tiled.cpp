// C = A @ B with 64x64 tiles (row-major, float32).
#include <algorithm>
#include <cstdint>

extern "C" void matmul_tiled_launch(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k) {
    constexpr int64_t kTile = 64;
    for (int64_t i = 0; i < m * n; ++i) c[i] = 0.0f;
#pragma omp parallel for collapse(2)
    for (int64_t i0 = 0; i0 < m; i0 += kTile) {
        for (int64_t j0 = 0; j0 < n; j0 += kTile) {
            for (int64_t p0 = 0; p0 < k; p0 += kTile) {
                for (int64_t i = i0; i < std::min(i0 + kTile, m); ++i) {
                    for (int64_t p = p0; p < std::min(p0 + kTile, k); ++p) {
                        const float av = a[i * k + p];
#pragma omp simd
                        for (int64_t j = j0; j < std::min(j0 + kTile, n); ++j) c[i * n + j] += av * b[p * n + j];
                    }
                }
            }
        }
    }
}

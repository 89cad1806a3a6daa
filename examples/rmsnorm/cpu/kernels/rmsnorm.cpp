// RMSNorm over the last dimension on the CPU: y = x * rsqrt(mean(x^2) + eps) * weight, for a
// row-major (rows, hidden) tensor.
//
// Each thread takes whole rows. A row is read twice, the second time from cache, and written
// once, with no temporaries; eager PyTorch makes seven passes over memory and allocates three
// full-size temporaries. Both inner loops vectorise (`omp simd`; the reduction keeps one partial
// sum per lane).
#include <cmath>
#include <cstdint>

// x and y: rows * hidden contiguous floats; weight: hidden floats.
extern "C" void rmsnorm_cpu(const float* x, const float* weight, float* y, int64_t rows, int64_t hidden,
                            float eps) {
    if (hidden == 0) return;
    const float inv_hidden = 1.0f / static_cast<float>(hidden);
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * hidden;
        float* yr = y + r * hidden;
        float sum_sq = 0.0f;
#pragma omp simd reduction(+ : sum_sq)
        for (int64_t i = 0; i < hidden; ++i) sum_sq += xr[i] * xr[i];
        const float inv_rms = 1.0f / std::sqrt(sum_sq * inv_hidden + eps);
        // Same order of operations as the reference: (x * inv_rms) * weight.
#pragma omp simd
        for (int64_t i = 0; i < hidden; ++i) yr[i] = xr[i] * inv_rms * weight[i];
    }
}

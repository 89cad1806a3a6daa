// y = relu((x - mean[c]) / sqrt(var[c] + eps) * weight[c] + bias[c]) for an NCHW tensor.
//
// Per channel the normalisation folds into one multiply-add, y = max(x * scale + shift, 0) with
// scale = weight / sqrt(var + eps) and shift = bias - mean * scale: the same folding PyTorch's
// own inference kernel uses. The fold is recomputed on every call from the current values.
#include <cmath>
#include <cstdint>

extern "C" void bn_relu_launch(const float* x, const float* weight, const float* bias, const float* mean,
                               const float* var, float* y, int64_t n, int64_t c, int64_t hw, float eps) {
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t b = 0; b < n; ++b) {
        for (int64_t ch = 0; ch < c; ++ch) {
            const float scale = weight[ch] / std::sqrt(var[ch] + eps);
            const float shift = bias[ch] - mean[ch] * scale;
            const float* src = x + (b * c + ch) * hw;
            float* dst = y + (b * c + ch) * hw;
#pragma omp simd
            for (int64_t i = 0; i < hw; ++i) {
                const float v = src[i] * scale + shift;
                dst[i] = v > 0.0f ? v : 0.0f;
            }
        }
    }
}

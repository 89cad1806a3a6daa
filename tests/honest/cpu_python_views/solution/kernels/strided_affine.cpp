// out[b, p, c] = sigmoid(in[b, p, c] * weight[c] + bias[c]) where `in` is any strided
// (B, P, C) view (here a permuted NCHW tensor: stride 1 along P, H*W along C) and `out` is
// contiguous (B, P, C). Loops run over c innermost so the writes are contiguous.
#include <cmath>
#include <cstdint>

extern "C" void strided_affine_sigmoid_launch(const float* in, int64_t s0, int64_t s1, int64_t s2,
                                              const float* weight, const float* bias, float* out, int64_t B,
                                              int64_t P, int64_t C) {
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t b = 0; b < B; ++b) {
        for (int64_t p = 0; p < P; ++p) {
            const float* src = in + b * s0 + p * s1;
            float* dst = out + (b * P + p) * C;
            for (int64_t c = 0; c < C; ++c) {
                const float v = src[c * s2] * weight[c] + bias[c];
                dst[c] = 1.0f / (1.0f + std::exp(-v));
            }
        }
    }
}

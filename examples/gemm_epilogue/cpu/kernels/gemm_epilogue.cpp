// out = tanh(gelu(x @ weight^T + bias) * scale + shift) on the CPU, for x (M, K), weight (N, K),
// bias (N,), out (M, N), all row-major.
//
// A register-blocked GEMM whose epilogue runs on each output tile while it is still in cache, so
// the output is written once; eager PyTorch writes it, then reads and writes it again for each of
// its four epilogue ops. Layout of the work:
//   * out is cut into panels of kNr columns; each thread packs the kNr weight rows of a panel into
//     a k-major buffer (the panel stays in L1/L2 while it is used against every row of x);
//   * a micro-kernel computes a kMr x kNr tile with kMr * 2 vector accumulators in registers,
//     one broadcast of x and two vector loads of the panel per k;
//   * the epilogue (bias, GELU, scale, shift, tanh) is branch-free so the compiler vectorises it;
//     erf and tanh are polynomials/rationals because the C library's are scalar calls.
// Vectors are GCC vector extensions sized for AVX-512 or AVX2 (-march=native picks).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace {

#if defined(__AVX512F__)
constexpr int kLanes = 16;
#else
constexpr int kLanes = 8;
#endif
typedef float vec_t __attribute__((vector_size(kLanes * sizeof(float))));

constexpr int kMr = 6;           // rows of a micro-tile
constexpr int kNr = 2 * kLanes;  // columns of a micro-tile: two vectors

inline vec_t load(const float* p) {
    vec_t v;
    std::memcpy(&v, p, sizeof v);  // an unaligned vector load
    return v;
}

// exp(x) to about 1e-7 relative error, branch-free. Range reduction x = n*ln2 + f, |f| <= ln2/2,
// a degree-7 Taylor polynomial for exp(f), and 2^n built in the exponent bits.
inline float exp_approx(float x) {
    // Keep 2^n a normal float; the comparisons leave NaN untouched.
    x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
    const float shifter = 12582912.0f;  // 1.5 * 2^23: adding and subtracting it rounds to an integer
    const float n = (x * 1.44269504088896341f + shifter) - shifter;
    const float f = (x - n * 0.693145751953125f) - n * 1.428606765330187e-06f;  // ln2 split in two
    float p = 1.0f / 5040.0f;
    p = p * f + 1.0f / 720.0f;
    p = p * f + 1.0f / 120.0f;
    p = p * f + 1.0f / 24.0f;
    p = p * f + 1.0f / 6.0f;
    p = p * f + 0.5f;
    p = p * f + 1.0f;
    p = p * f + 1.0f;
    const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
    float scale;
    std::memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

// erf(x), Abramowitz & Stegun 7.1.26 (absolute error below 1.5e-7); PyTorch's vectorised CPU erf
// uses the same formula.
inline float erf_approx(float x) {
    const float a = std::fabs(x);
    const float t = 1.0f / (1.0f + 0.3275911f * a);
    const float r = ((((1.061405429f * t - 1.453152027f) * t + 1.421413741f) * t - 0.284496736f) * t
                     + 0.254829592f) * t;
    return std::copysign(1.0f - r * exp_approx(-a * a), x);
}

// tanh(x) = sign(x) * (1 - e) / (1 + e) with e = exp(-2|x|): no overflow, absolute error ~1e-7.
inline float tanh_approx(float x) {
    const float e = exp_approx(-2.0f * std::fabs(x));
    return std::copysign((1.0f - e) / (1.0f + e), x);
}

inline float epilogue(float v, float scale, float shift) {
    const float g = v * 0.5f * (1.0f + erf_approx(v * 0.70710678118654752f));  // exact GELU
    return tanh_approx(g * scale + shift);
}

// panel[k * kNr + j] = weight[n0 + j][k], zero for columns past N so the micro-kernel needs no tail.
void pack_panel(const float* weight, float* panel, int64_t n0, int64_t N, int64_t K) {
    for (int j = 0; j < kNr; ++j) {
        if (n0 + j < N) {
            const float* w = weight + (n0 + j) * K;
            for (int64_t k = 0; k < K; ++k) panel[k * kNr + j] = w[k];
        } else {
            for (int64_t k = 0; k < K; ++k) panel[k * kNr + j] = 0.0f;
        }
    }
}

// tile[i][j] = sum_k rows[i][k] * panel[k][j] for a kMr x kNr tile; the accumulators stay in
// registers for the whole k loop.
void micro_kernel(const float* const rows[kMr], const float* panel, int64_t K, float* tile) {
    vec_t acc[kMr][2] = {};
    for (int64_t k = 0; k < K; ++k) {
        const vec_t b0 = load(panel + k * kNr);
        const vec_t b1 = load(panel + k * kNr + kLanes);
        for (int i = 0; i < kMr; ++i) {
            const float a = rows[i][k];
            acc[i][0] += a * b0;
            acc[i][1] += a * b1;
        }
    }
    std::memcpy(tile, acc, sizeof acc);
}

}  // namespace

extern "C" void gemm_epilogue_cpu(const float* x, const float* weight, const float* bias, float* out, int64_t M,
                                  int64_t N, int64_t K, float scale, float shift) {
    const int64_t panels = (N + kNr - 1) / kNr;
#pragma omp parallel
    {
        std::vector<float> panel(std::max<int64_t>(K, 1) * kNr);  // this thread's packed weights
        float tile[kMr * kNr];
#pragma omp for schedule(static)
        for (int64_t p = 0; p < panels; ++p) {
            const int64_t n0 = p * kNr;
            const int64_t nr = std::min<int64_t>(kNr, N - n0);
            pack_panel(weight, panel.data(), n0, N, K);
            for (int64_t m0 = 0; m0 < M; m0 += kMr) {
                const int64_t mr = std::min<int64_t>(kMr, M - m0);
                // Past the last row, repeat it: those tile rows are computed but never stored.
                const float* rows[kMr];
                for (int i = 0; i < kMr; ++i) rows[i] = x + std::min<int64_t>(m0 + i, M - 1) * K;
                micro_kernel(rows, panel.data(), K, tile);
                for (int64_t i = 0; i < mr; ++i) {
                    float* o = out + (m0 + i) * N + n0;
                    const float* t = tile + i * kNr;
#pragma omp simd
                    for (int64_t j = 0; j < nr; ++j) o[j] = epilogue(t[j] + bias[n0 + j], scale, shift);
                }
            }
        }
    }
}

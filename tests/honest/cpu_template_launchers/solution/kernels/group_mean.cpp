// Means over consecutive groups of G columns of a row-major (rows, cols) matrix, written into
// columns [offset, offset + cols / G) of a row-major output with out_cols columns.
//
// One template, two instantiations: G is a compile-time constant, so the inner loop is fully
// unrolled and 1 / G is an exact power of two for both sizes used here.
#include <cstdint>

namespace {

template <int G>
void group_mean_rows(const float* in, int64_t rows, int64_t cols, float* out, int64_t out_cols,
                     int64_t offset) {
    static_assert(G > 0 && (G & (G - 1)) == 0, "G must be a power of two");
    constexpr float inv = 1.0f / static_cast<float>(G);
    const int64_t groups = cols / G;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* src = in + r * cols;
        float* dst = out + r * out_cols + offset;
        for (int64_t g = 0; g < groups; ++g) {
            float sum = 0.0f;
#pragma GCC unroll 8
            for (int j = 0; j < G; ++j) sum += src[g * G + j];
            dst[g] = sum * inv;
        }
    }
}

}  // namespace

extern "C" void group_mean2_launch(const float* in, int64_t rows, int64_t cols, float* out,
                                   int64_t out_cols, int64_t offset) {
    group_mean_rows<2>(in, rows, cols, out, out_cols, offset);
}

extern "C" void group_mean4_launch(const float* in, int64_t rows, int64_t cols, float* out,
                                   int64_t out_cols, int64_t offset) {
    group_mean_rows<4>(in, rows, cols, out, out_cols, offset);
}

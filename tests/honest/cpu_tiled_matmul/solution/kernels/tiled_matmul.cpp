// C (M, N) = A (M, K) @ B (K, N), all row-major float32, without any library.
//
// Blocking: C is cut into kMc x kNc tiles; for each tile the k dimension is walked in panels of
// kKc so that the A block (kMc x kKc) and the B panel (kKc x kNc) stay in L1/L2 while every
// element of the tile accumulates over them. The innermost loop runs along a row of B and of C,
// contiguous in memory, so the compiler vectorises it. Edges are clamped with std::min: no
// size needs to be a multiple of a block.
#include <algorithm>
#include <cstdint>

namespace {

constexpr int64_t kMc = 32;
constexpr int64_t kNc = 64;
constexpr int64_t kKc = 64;

void tile(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c, int64_t K,
          int64_t N, int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
    // The tile is written from zero here: the output comes from torch::empty, not zeroed.
    for (int64_t i = i0; i < i1; ++i)
        for (int64_t j = j0; j < j1; ++j) c[i * N + j] = 0.0f;
    for (int64_t k0 = 0; k0 < K; k0 += kKc) {
        const int64_t k1 = std::min(k0 + kKc, K);
        for (int64_t i = i0; i < i1; ++i) {
            float* __restrict__ crow = c + i * N;
            for (int64_t k = k0; k < k1; ++k) {
                const float aik = a[i * K + k];
                const float* __restrict__ brow = b + k * N;
#pragma omp simd
                for (int64_t j = j0; j < j1; ++j) crow[j] += aik * brow[j];
            }
        }
    }
}

}  // namespace

extern "C" void tiled_matmul_launch(const float* a, const float* b, float* c, int64_t M, int64_t K,
                                    int64_t N) {
    const int64_t row_blocks = (M + kMc - 1) / kMc;
    const int64_t col_blocks = (N + kNc - 1) / kNc;
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t bi = 0; bi < row_blocks; ++bi) {
        for (int64_t bj = 0; bj < col_blocks; ++bj) {
            const int64_t i0 = bi * kMc;
            const int64_t j0 = bj * kNc;
            tile(a, b, c, K, N, i0, std::min(i0 + kMc, M), j0, std::min(j0 + kNc, N));
        }
    }
}

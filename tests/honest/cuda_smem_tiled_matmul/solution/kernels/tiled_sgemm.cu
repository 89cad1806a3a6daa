// C (M, N) = A (M, K) @ B (K, N), row-major fp32, fp32 accumulation, no library.
//
// Each 256-thread block computes a kBM x kBN = 64 x 64 tile of C. The k dimension is walked in
// steps of kBK = 16: the block stages a 64 x 16 slice of A (stored transposed, so a thread's
// reads along m are contiguous) and a 16 x 64 slice of B in shared memory, then every thread
// accumulates a 4 x 4 micro-tile in registers. Thread (ty, tx) owns rows ty + 16 i and columns
// tx + 16 j: a warp's reads of B's slice touch 16 consecutive words (no bank conflicts), its reads
// of A's slice two words (broadcast), and its stores to C are 16 consecutive floats. Loads past
// the edges of A and B read as zero and stores past the edges of C are skipped, so no size needs
// to be a multiple of a tile.
#include <cuda_runtime.h>

#include <cstdint>

namespace {

constexpr int kBM = 64;
constexpr int kBN = 64;
constexpr int kBK = 16;
constexpr int kTM = 4;
constexpr int kTN = 4;
constexpr int kThreads = (kBM / kTM) * (kBN / kTN);  // 256
constexpr int kPad = 4;                             // breaks the stride of the transposed stores

__global__ void __launch_bounds__(kThreads) tiled_sgemm_kernel(const float* __restrict__ A,
                                                               const float* __restrict__ B, float* __restrict__ C,
                                                               int M, int N, int K) {
    __shared__ float As[kBK][kBM + kPad];  // As[k][m] = A[row0 + m][k0 + k]
    __shared__ float Bs[kBK][kBN + kPad];  // Bs[k][n] = B[k0 + k][col0 + n]

    const int tid = threadIdx.x;
    const int tx = tid % (kBN / kTN);
    const int ty = tid / (kBN / kTN);
    const int row0 = blockIdx.y * kBM;
    const int col0 = blockIdx.x * kBN;

    float acc[kTM][kTN];
#pragma unroll
    for (int i = 0; i < kTM; ++i)
#pragma unroll
        for (int j = 0; j < kTN; ++j) acc[i][j] = 0.0f;

    for (int k0 = 0; k0 < K; k0 += kBK) {
        for (int e = tid; e < kBM * kBK; e += kThreads) {
            const int m = e / kBK;
            const int k = e % kBK;
            const int gr = row0 + m;
            const int gk = k0 + k;
            As[k][m] = (gr < M && gk < K) ? A[static_cast<int64_t>(gr) * K + gk] : 0.0f;
        }
        for (int e = tid; e < kBK * kBN; e += kThreads) {
            const int k = e / kBN;
            const int n = e % kBN;
            const int gk = k0 + k;
            const int gc = col0 + n;
            Bs[k][n] = (gk < K && gc < N) ? B[static_cast<int64_t>(gk) * N + gc] : 0.0f;
        }
        __syncthreads();

#pragma unroll
        for (int k = 0; k < kBK; ++k) {
            float a[kTM];
            float b[kTN];
#pragma unroll
            for (int i = 0; i < kTM; ++i) a[i] = As[k][ty + i * (kBM / kTM)];
#pragma unroll
            for (int j = 0; j < kTN; ++j) b[j] = Bs[k][tx + j * (kBN / kTN)];
#pragma unroll
            for (int i = 0; i < kTM; ++i)
#pragma unroll
                for (int j = 0; j < kTN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }

#pragma unroll
    for (int i = 0; i < kTM; ++i) {
        const int r = row0 + ty + i * (kBM / kTM);
        if (r >= M) continue;
#pragma unroll
        for (int j = 0; j < kTN; ++j) {
            const int c = col0 + tx + j * (kBN / kTN);
            if (c < N) C[static_cast<int64_t>(r) * N + c] = acc[i][j];
        }
    }
}

}  // namespace

// Returns a cudaError_t. M, N and K must fit in an int (the binding checks).
extern "C" int tiled_sgemm_launch(const float* A, const float* B, float* C, int M, int N, int K, cudaStream_t stream) {
    if (M == 0 || N == 0) return cudaSuccess;
    const dim3 grid((N + kBN - 1) / kBN, (M + kBM - 1) / kBM);
    tiled_sgemm_kernel<<<grid, kThreads, 0, stream>>>(A, B, C, M, N, K);
    return cudaGetLastError();
}

// C = diag(A) @ B without forming diag(A): C[i, j] = A[i] * B[i, j] over a row-major (N, M) B.
//
// A 2-D grid: blockIdx.y walks rows (A[i] is read once per thread and kept in a register),
// blockIdx.x and the thread index cover the row's columns, as float4 when M % 4 == 0 and the
// pointers are 16-byte aligned (every row start is then aligned too), as floats otherwise.
#include <cuda_runtime.h>

#include <cstdint>

namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxGridY = 65535;

__device__ __forceinline__ float4 scale4(float a, float4 b) { return make_float4(a * b.x, a * b.y, a * b.z, a * b.w); }
__device__ __forceinline__ float scale4(float a, float b) { return a * b; }

// `units` vectors of V per row; rows strided by gridDim.y.
template <typename V>
__global__ void __launch_bounds__(kThreads) diag_scale_kernel(const float* __restrict__ diag, const V* __restrict__ b,
                                                              V* __restrict__ c, int64_t rows, int64_t units) {
    const int64_t col = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
    if (col >= units) return;
    for (int64_t row = blockIdx.y; row < rows; row += gridDim.y) {
        const float a = __ldg(&diag[row]);
        const int64_t i = row * units + col;
        c[i] = scale4(a, __ldg(&b[i]));
    }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

template <typename V>
void launch(const float* diag, const float* b, float* c, int64_t rows, int64_t units, cudaStream_t stream) {
    const dim3 grid(static_cast<unsigned>((units + kThreads - 1) / kThreads),
                    static_cast<unsigned>(rows < kMaxGridY ? rows : kMaxGridY));
    diag_scale_kernel<V><<<grid, kThreads, 0, stream>>>(diag, reinterpret_cast<const V*>(b), reinterpret_cast<V*>(c),
                                                        rows, units);
}

}  // namespace

extern "C" int diag_scale_launch(const float* diag, const float* b, float* c, int64_t rows, int64_t cols,
                                 cudaStream_t stream) {
    if (rows == 0 || cols == 0) return cudaSuccess;
    if (cols % 4 == 0 && aligned16(b) && aligned16(c)) {
        launch<float4>(diag, b, c, rows, cols / 4, stream);
    } else {
        launch<float>(diag, b, c, rows, cols, stream);
    }
    return cudaGetLastError();
}

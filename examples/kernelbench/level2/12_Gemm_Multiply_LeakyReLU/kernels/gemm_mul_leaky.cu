// The epilogue of the cuBLAS product, in place over a row-major (rows, cols) matrix:
//   y[r, c] = leaky_relu((y[r, c] + bias[c]) * multiplier) with a slope of 0.01
// one read and one write of the output instead of eager's two extra passes (multiply, then
// LeakyReLU) after the Linear. DELIBERATELY WRONG: the task's slope is its negative_slope
// argument (0.1), not 0.01; this file exists so that reports show an `incorrect` verdict.
//
// A 2-D grid: the thread index covers columns (a float4 of them when cols % 4 == 0 and the
// pointers are 16-byte aligned), so each thread loads its bias once and keeps it in registers
// while blockIdx.y walks the rows.
#include <cuda_runtime.h>

#include <cstdint>

namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxGridY = 65535;

// DELIBERATE BUG (a known-incorrect example): the slope is hard-coded to nn.LeakyReLU's default
// 0.01 instead of the task's negative_slope, so negative outputs come out 10x too small.
constexpr float kNegativeSlope = 0.01f;

__device__ __forceinline__ float op(float acc, float b, float multiplier) {
    const float v = (acc + b) * multiplier;
    return v < 0.0f ? v * kNegativeSlope : v;
}

__device__ __forceinline__ float apply(float acc, float b, float p) { return op(acc, b, p); }

__device__ __forceinline__ float4 apply(float4 acc, float4 b, float p) {
    return make_float4(op(acc.x, b.x, p), op(acc.y, b.y, p), op(acc.z, b.z, p), op(acc.w, b.w, p));
}

template <typename V>
__global__ void __launch_bounds__(kThreads)
    gemm_mul_leaky_kernel(V* __restrict__ y, const V* __restrict__ bias, int64_t rows, int64_t units, float p) {
    const int64_t col = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
    if (col >= units) return;
    const V b = __ldg(&bias[col]);
    for (int64_t row = blockIdx.y; row < rows; row += gridDim.y) {
        const int64_t i = row * units + col;
        y[i] = apply(y[i], b, p);
    }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

template <typename V>
void launch(float* y, const float* bias, int64_t rows, int64_t units, float p, cudaStream_t stream) {
    const dim3 grid(static_cast<unsigned>((units + kThreads - 1) / kThreads),
                    static_cast<unsigned>(rows < kMaxGridY ? rows : kMaxGridY));
    V* out = reinterpret_cast<V*>(y);
    const V* b = reinterpret_cast<const V*>(bias);
    gemm_mul_leaky_kernel<V><<<grid, kThreads, 0, stream>>>(out, b, rows, units, p);
}

}  // namespace

extern "C" int gemm_mul_leaky_epilogue(float* y, const float* bias, int64_t rows, int64_t cols, float multiplier,
    cudaStream_t stream) {
    if (rows == 0 || cols == 0) return cudaSuccess;
    if (cols % 4 == 0 && aligned16(y) && aligned16(bias)) {
        launch<float4>(y, bias, rows, cols / 4, multiplier, stream);
    } else {
        launch<float>(y, bias, rows, cols, multiplier, stream);
    }
    return cudaGetLastError();
}

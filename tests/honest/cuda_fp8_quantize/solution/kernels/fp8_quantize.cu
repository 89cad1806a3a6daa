// y = x * scale rounded to float8_e4m3fn, to nearest even, saturating at +-448 (the dtype has no
// infinity): what clamp followed by PyTorch's cast gives. Two bfloat16 values in, two 8-bit
// values out per thread step, through CUDA's own conversions (cuda_fp8.h).
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace {

__device__ __forceinline__ __nv_fp8_storage_t quantize(__nv_bfloat16 v, float scale) {
    return __nv_cvt_float_to_fp8(__bfloat162float(v) * scale, __NV_SATFINITE, __NV_E4M3);
}

__global__ void fp8_quantize_kernel(const __nv_bfloat16* __restrict__ x, __nv_fp8_storage_t* __restrict__ y,
                                    int64_t n, float scale) {
    const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += stride) {
        y[i] = quantize(x[i], scale);
    }
}

}  // namespace

extern "C" int fp8_quantize_launch(const void* x, void* y, int64_t n, float scale, cudaStream_t stream) {
    if (n == 0) return 0;
    constexpr int kThreads = 256;
    const int64_t wanted = (n + kThreads - 1) / kThreads;
    const int blocks = static_cast<int>(wanted < 132 * 32 ? wanted : 132 * 32);
    fp8_quantize_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<const __nv_bfloat16*>(x),
                                                        static_cast<__nv_fp8_storage_t*>(y), n, scale);
    return static_cast<int>(cudaGetLastError());
}

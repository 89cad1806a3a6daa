"""KernelBench level 1, problem 88 (minGPT's tanh GELU), as a KernelBench-style generation: one
file that builds its own extension with torch.utils.cpp_extension.load_inline and defines
ModelNew. The kernel fuses the whole expression into one float4-vectorised pass, with a scalar
kernel for the last n % 4 elements, launched on PyTorch's current stream."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

new_gelu_cuda_source = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

#include <cstdint>

__device__ __forceinline__ float new_gelu_scalar(float x) {
    const float inner = 0.7978845608028654f * (x + 0.044715f * (x * x * x));  // sqrt(2 / pi) * (...)
    return 0.5f * x * (1.0f + tanhf(inner));
}

__global__ void new_gelu_vec4_kernel(const float4* __restrict__ x, float4* __restrict__ y, int64_t vectors) {
    const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < vectors; i += stride) {
        const float4 v = __ldg(&x[i]);
        y[i] = make_float4(new_gelu_scalar(v.x), new_gelu_scalar(v.y), new_gelu_scalar(v.z), new_gelu_scalar(v.w));
    }
}

__global__ void new_gelu_tail_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
    const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
    if (i < n) y[i] = new_gelu_scalar(x[i]);
}

torch::Tensor new_gelu_cuda(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "new_gelu_cuda: x must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "new_gelu_cuda: x must be float32");
    TORCH_CHECK(x.is_contiguous(), "new_gelu_cuda: x must be contiguous");
    auto y = torch::empty_like(x);
    const int64_t n = x.numel();
    if (n == 0) return y;
    const float* xp = x.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    const cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
    constexpr int threads = 256;
    int64_t done = 0;
    // torch::empty_like and a contiguous input are 16-byte aligned unless x is an offset view.
    if (reinterpret_cast<uintptr_t>(xp) % 16 == 0 && reinterpret_cast<uintptr_t>(yp) % 16 == 0) {
        const int64_t vectors = n / 4;
        if (vectors > 0) {
            const int64_t wanted = (vectors + threads - 1) / threads;
            const int blocks = static_cast<int>(wanted < 132 * 16 ? wanted : 132 * 16);
            new_gelu_vec4_kernel<<<blocks, threads, 0, stream>>>(reinterpret_cast<const float4*>(xp),
                                                                 reinterpret_cast<float4*>(yp), vectors);
        }
        done = vectors * 4;
    }
    const int64_t rest = n - done;
    if (rest > 0) {
        const int64_t wanted = (rest + threads - 1) / threads;
        TORCH_CHECK(wanted <= 2147483647, "new_gelu_cuda: unaligned tensor too large for the tail kernel");
        new_gelu_tail_kernel<<<static_cast<int>(wanted), threads, 0, stream>>>(xp + done, yp + done, rest);
    }
    const cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "new_gelu_cuda: launch failed: ", cudaGetErrorString(err));
    return y;
}
"""

new_gelu_cpp_source = "torch::Tensor new_gelu_cuda(torch::Tensor x);"

new_gelu = load_inline(
    name="minigpt_new_gelu",
    cpp_sources=new_gelu_cpp_source,
    cuda_sources=new_gelu_cuda_source,
    functions=["new_gelu_cuda"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()
        self.new_gelu = new_gelu

    def forward(self, x):
        return self.new_gelu.new_gelu_cuda(x)

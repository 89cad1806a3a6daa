// Tensor handling for the cuBLAS product (kernels/gemm_mul_leaky_gemm.cpp) and its fused
// bias + multiply + LeakyReLU epilogue (kernels/gemm_mul_leaky.cu, whose slope is deliberately
// wrong: see model_new.py), both on PyTorch's current stream.
// cuBLAS's workspace is an ordinary uint8 tensor from torch::empty, so it is stream-ordered like
// any other.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include <c10/cuda/CUDAStream.h>

#include <cstddef>
#include <limits>
#include <vector>

#include "../binding_registry.h"

extern "C" int gemm_mul_leaky_gemm(const float* x, const float* weight, float* out, int M, int N, int K,
                                   void* workspace, size_t workspace_bytes, cudaStream_t stream);
extern "C" const char* gemm_mul_leaky_gemm_error(int status);
extern "C" int gemm_mul_leaky_epilogue(float* y, const float* bias, int64_t rows, int64_t cols, float multiplier,
                                       cudaStream_t stream);

constexpr int64_t kWorkspaceBytes = int64_t(32) << 20;  // what PyTorch gives its own cuBLAS handles on Hopper

static torch::Tensor gemm_mul_leaky_forward(const torch::Tensor& x, const torch::Tensor& weight,
                                            const torch::Tensor& bias, double multiplier) {
    TORCH_CHECK(x.is_cuda() && weight.is_cuda() && bias.is_cuda(), "gemm_mul_leaky: tensors must be on the GPU");
    TORCH_CHECK(x.device() == weight.device() && x.device() == bias.device(),
                "gemm_mul_leaky: tensors must be on one device");
    TORCH_CHECK(x.get_device() == c10::cuda::current_device(), "gemm_mul_leaky: x must be on the current device");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && weight.scalar_type() == torch::kFloat32 &&
                    bias.scalar_type() == torch::kFloat32,
                "gemm_mul_leaky: tensors must be float32");
    TORCH_CHECK(x.is_contiguous() && weight.is_contiguous() && bias.is_contiguous(),
                "gemm_mul_leaky: tensors must be contiguous");
    TORCH_CHECK(weight.dim() == 2 && bias.dim() == 1 && bias.size(0) == weight.size(0),
                "gemm_mul_leaky: weight must be (out, in) and bias (out,), got ", weight.sizes(), " and ",
                bias.sizes());
    TORCH_CHECK(x.dim() >= 1 && x.size(-1) == weight.size(1), "gemm_mul_leaky: x's last dimension must be ",
                weight.size(1), ", got ", x.sizes());

    const int64_t N = weight.size(0);
    const int64_t K = weight.size(1);
    int64_t M = 1;  // leading dimensions of x flatten into rows, as nn.Linear does
    for (int64_t d = 0; d + 1 < x.dim(); ++d) M *= x.size(d);
    constexpr int64_t kIntMax = std::numeric_limits<int>::max();
    TORCH_CHECK(M <= kIntMax && N <= kIntMax && K <= kIntMax, "gemm_mul_leaky: cuBLAS takes int sizes");

    std::vector<int64_t> out_sizes = x.sizes().vec();
    out_sizes.back() = N;
    torch::Tensor out = torch::empty(out_sizes, x.options());
    torch::Tensor workspace = torch::empty({kWorkspaceBytes}, x.options().dtype(torch::kUInt8));
    const cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
    const int status = gemm_mul_leaky_gemm(x.data_ptr<float>(), weight.data_ptr<float>(), out.data_ptr<float>(),
                                           static_cast<int>(M), static_cast<int>(N), static_cast<int>(K),
                                           workspace.data_ptr(), static_cast<size_t>(kWorkspaceBytes), stream);
    TORCH_CHECK(status == 0, "gemm_mul_leaky: cuBLAS failed: ", gemm_mul_leaky_gemm_error(status));
    const int err = gemm_mul_leaky_epilogue(out.data_ptr<float>(), bias.data_ptr<float>(), M, N,
                                            static_cast<float>(multiplier), stream);
    TORCH_CHECK(err == 0, "gemm_mul_leaky: epilogue launch failed: ",
                cudaGetErrorString(static_cast<cudaError_t>(err)));
    return out;
}

static void register_gemm_mul_leaky(pybind11::module& m) {
    m.def("gemm_mul_leaky_forward", &gemm_mul_leaky_forward,
          "leaky_relu((x @ W^T + b) * multiplier) with a deliberately wrong slope: cuBLAS, then one fused "
          "epilogue kernel",
          pybind11::arg("x"), pybind11::arg("weight"), pybind11::arg("bias"), pybind11::arg("multiplier"));
}
REGISTER_BINDING(gemm_mul_leaky, register_gemm_mul_leaky);

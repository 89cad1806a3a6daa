// Tensor handling for the cuBLAS product (kernels/linear_gelu_gemm.cpp) and its fused epilogue
// (kernels/linear_gelu.cu), both on PyTorch's current stream.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include <c10/cuda/CUDAStream.h>

#include <limits>
#include <vector>

#include "../binding_registry.h"

extern "C" int linear_gelu_gemm(const float* x, const float* weight, float* out, int M, int N, int K,
                                cudaStream_t stream);
extern "C" const char* linear_gelu_gemm_error(int status);
extern "C" int linear_gelu_epilogue(float* y, const float* bias, int64_t rows, int64_t cols, cudaStream_t stream);

static torch::Tensor linear_gelu_forward(const torch::Tensor& x, const torch::Tensor& weight,
                                         const torch::Tensor& bias) {
    TORCH_CHECK(x.is_cuda() && weight.is_cuda() && bias.is_cuda(), "linear_gelu: tensors must be on the GPU");
    TORCH_CHECK(x.device() == weight.device() && x.device() == bias.device(),
                "linear_gelu: tensors must be on one device");
    TORCH_CHECK(x.get_device() == c10::cuda::current_device(), "linear_gelu: x must be on the current device");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && weight.scalar_type() == torch::kFloat32 &&
                    bias.scalar_type() == torch::kFloat32,
                "linear_gelu: tensors must be float32");
    TORCH_CHECK(x.is_contiguous() && weight.is_contiguous() && bias.is_contiguous(),
                "linear_gelu: tensors must be contiguous");
    TORCH_CHECK(weight.dim() == 2 && bias.dim() == 1 && bias.size(0) == weight.size(0),
                "linear_gelu: weight must be (out, in) and bias (out,), got ", weight.sizes(), " and ", bias.sizes());
    TORCH_CHECK(x.dim() >= 1 && x.size(-1) == weight.size(1), "linear_gelu: x's last dimension must be ",
                weight.size(1), ", got ", x.sizes());

    const int64_t N = weight.size(0);
    const int64_t K = weight.size(1);
    const int64_t M = K == 0 ? 0 : x.numel() / K;
    constexpr int64_t kIntMax = std::numeric_limits<int>::max();
    TORCH_CHECK(M <= kIntMax && N <= kIntMax && K <= kIntMax, "linear_gelu: cuBLAS takes int sizes");

    std::vector<int64_t> out_sizes = x.sizes().vec();
    out_sizes.back() = N;
    torch::Tensor out = torch::empty(out_sizes, x.options());
    const cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
    const int status = linear_gelu_gemm(x.data_ptr<float>(), weight.data_ptr<float>(), out.data_ptr<float>(),
                                        static_cast<int>(M), static_cast<int>(N), static_cast<int>(K), stream);
    TORCH_CHECK(status == 0, "linear_gelu: cuBLAS failed: ", linear_gelu_gemm_error(status));
    const int err = linear_gelu_epilogue(out.data_ptr<float>(), bias.data_ptr<float>(), M, N, stream);
    TORCH_CHECK(err == 0, "linear_gelu: epilogue launch failed: ", cudaGetErrorString(static_cast<cudaError_t>(err)));
    return out;
}

static void register_linear_gelu(pybind11::module& m) {
    m.def("linear_gelu_forward", &linear_gelu_forward, "gelu(x @ weight^T + bias): cuBLAS, then a fused epilogue",
          pybind11::arg("x"), pybind11::arg("weight"), pybind11::arg("bias"));
}
REGISTER_BINDING(linear_gelu, register_linear_gelu);

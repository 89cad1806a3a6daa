// Tensor handling for the linear layer and its epilogue: check the inputs, allocate the output,
// then on PyTorch's current stream run the cuBLAS GEMM (gemm_epilogue_gemm.cpp) and the fused
// bias + epilogue kernel (gemm_epilogue.cu) in place on its output.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include <c10/cuda/CUDAStream.h>

#include <limits>

#include "../binding_registry.h"

extern "C" int gemm_epilogue_gemm(const float* x, const float* weight, float* out, int64_t M, int64_t N,
                                  int64_t K, cudaStream_t stream);
extern "C" const char* gemm_epilogue_gemm_error(int status);
extern "C" int gemm_epilogue_launch(float* y, const float* bias, int64_t rows, int64_t cols, float scale,
                                    float shift, cudaStream_t stream);

static torch::Tensor gemm_epilogue_forward(const torch::Tensor& x, const torch::Tensor& weight,
                                           const torch::Tensor& bias, double scale, double shift) {
    TORCH_CHECK(x.is_cuda() && weight.is_cuda() && bias.is_cuda(), "gemm_epilogue: x, weight and bias must be CUDA tensors");
    TORCH_CHECK(x.device() == weight.device() && x.device() == bias.device(),
                "gemm_epilogue: x, weight and bias must be on the same device");
    TORCH_CHECK(x.get_device() == c10::cuda::current_device(), "gemm_epilogue: x must be on the current CUDA device");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && weight.scalar_type() == torch::kFloat32 &&
                    bias.scalar_type() == torch::kFloat32,
                "gemm_epilogue: x, weight and bias must be float32");
    TORCH_CHECK(x.is_contiguous() && weight.is_contiguous() && bias.is_contiguous(),
                "gemm_epilogue: x, weight and bias must be contiguous");
    TORCH_CHECK(weight.dim() == 2 && bias.dim() == 1 && bias.size(0) == weight.size(0),
                "gemm_epilogue: weight must be (out_features, in_features) and bias (out_features,), got ",
                weight.sizes(), " and ", bias.sizes());
    TORCH_CHECK(x.dim() >= 1 && x.size(-1) == weight.size(1), "gemm_epilogue: x's last dimension must be ",
                weight.size(1), ", got x ", x.sizes());

    const int64_t N = weight.size(0);
    const int64_t K = weight.size(1);
    // Leading dimensions of x are flattened into rows, as nn.Linear does.
    int64_t M = 1;
    for (int64_t d = 0; d + 1 < x.dim(); ++d) M *= x.size(d);
    constexpr int64_t kIntMax = std::numeric_limits<int>::max();
    TORCH_CHECK(M <= kIntMax && N <= kIntMax && K <= kIntMax, "gemm_epilogue: cuBLAS takes int dimensions, got M=", M,
                " N=", N, " K=", K);

    std::vector<int64_t> out_sizes = x.sizes().vec();
    out_sizes.back() = N;
    auto out = torch::empty(out_sizes, x.options());
    const cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
    const int gemm_status = gemm_epilogue_gemm(x.data_ptr<float>(), weight.data_ptr<float>(), out.data_ptr<float>(),
                                               M, N, K, stream);
    TORCH_CHECK(gemm_status == 0, "gemm_epilogue: cuBLAS GEMM failed: ", gemm_epilogue_gemm_error(gemm_status));
    const int err = gemm_epilogue_launch(out.data_ptr<float>(), bias.data_ptr<float>(), M, N,
                                         static_cast<float>(scale), static_cast<float>(shift), stream);
    TORCH_CHECK(err == 0, "gemm_epilogue: kernel launch failed: ", cudaGetErrorString(static_cast<cudaError_t>(err)));
    return out;
}

static void register_gemm_epilogue(pybind11::module& m) {
    m.def("gemm_epilogue_forward", &gemm_epilogue_forward,
          "tanh(gelu(x @ weight^T + bias) * scale + shift): cuBLAS GEMM, then one fused epilogue kernel",
          pybind11::arg("x"), pybind11::arg("weight"), pybind11::arg("bias"), pybind11::arg("scale"),
          pybind11::arg("shift"));
}
REGISTER_BINDING(gemm_epilogue, register_gemm_epilogue);

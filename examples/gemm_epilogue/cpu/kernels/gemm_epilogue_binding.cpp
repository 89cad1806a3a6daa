// Tensor handling for kernels/gemm_epilogue.cpp: check the inputs, allocate the output, run.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>

#include "../binding_registry.h"

extern "C" void gemm_epilogue_cpu(const float* x, const float* weight, const float* bias, float* out, int64_t M,
                                  int64_t N, int64_t K, float scale, float shift);

static torch::Tensor gemm_epilogue_forward(const torch::Tensor& x, const torch::Tensor& weight,
                                           const torch::Tensor& bias, double scale, double shift) {
    TORCH_CHECK(x.device().is_cpu() && weight.device().is_cpu() && bias.device().is_cpu(),
                "gemm_epilogue: x, weight and bias must be CPU tensors");
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
    std::vector<int64_t> out_sizes = x.sizes().vec();
    out_sizes.back() = N;
    auto out = torch::empty(out_sizes, x.options());
    gemm_epilogue_cpu(x.data_ptr<float>(), weight.data_ptr<float>(), bias.data_ptr<float>(), out.data_ptr<float>(), M,
                      N, K, static_cast<float>(scale), static_cast<float>(shift));
    return out;
}

static void register_gemm_epilogue(pybind11::module& m) {
    m.def("gemm_epilogue_forward", &gemm_epilogue_forward,
          "tanh(gelu(x @ weight^T + bias) * scale + shift) with the epilogue fused into the GEMM",
          pybind11::arg("x"), pybind11::arg("weight"), pybind11::arg("bias"), pybind11::arg("scale"),
          pybind11::arg("shift"));
}
REGISTER_BINDING(gemm_epilogue, register_gemm_epilogue);

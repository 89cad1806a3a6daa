// Tensor handling for kernels/fused_elementwise.cpp: check the inputs, allocate the output, run.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>

#include "../binding_registry.h"

extern "C" void fused_elementwise_cpu(const float* x, const float* bias, float* y, int64_t rows,
                                      int64_t features, float scale, float clip);

static torch::Tensor fused_elementwise_forward(const torch::Tensor& x, const torch::Tensor& bias,
                                               double scale, double clip) {
    TORCH_CHECK(x.device().is_cpu() && bias.device().is_cpu(), "fused_elementwise: x and bias must be CPU tensors");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && bias.scalar_type() == torch::kFloat32,
                "fused_elementwise: x and bias must be float32");
    TORCH_CHECK(x.is_contiguous() && bias.is_contiguous(), "fused_elementwise: x and bias must be contiguous");
    TORCH_CHECK(x.dim() >= 1 && bias.dim() == 1 && x.size(-1) == bias.size(0),
                "fused_elementwise: bias must have shape (features,) matching x's last dimension, got x ",
                x.sizes(), " and bias ", bias.sizes());

    auto y = torch::empty_like(x);
    const int64_t features = bias.size(0);
    const int64_t rows = features == 0 ? 0 : x.numel() / features;
    fused_elementwise_cpu(x.data_ptr<float>(), bias.data_ptr<float>(), y.data_ptr<float>(), rows, features,
                          static_cast<float>(scale), static_cast<float>(clip));
    return y;
}

static void register_fused_elementwise(pybind11::module& m) {
    m.def("fused_elementwise_forward", &fused_elementwise_forward,
          "clamp(gelu(x * scale + bias), -clip, clip) in one pass", pybind11::arg("x"), pybind11::arg("bias"),
          pybind11::arg("scale"), pybind11::arg("clip"));
}
REGISTER_BINDING(fused_elementwise, register_fused_elementwise);

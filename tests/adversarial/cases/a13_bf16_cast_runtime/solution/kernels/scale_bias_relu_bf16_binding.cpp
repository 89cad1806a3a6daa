#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>

#include "../binding_registry.h"

extern "C" void scale_bias_relu_bf16_launch(const uint16_t* x, const float* bias, uint16_t* y,
                                            int64_t rows, int64_t cols, float scale);

static torch::Tensor scale_bias_relu_bf16_forward(const torch::Tensor& x, const torch::Tensor& bias,
                                                  double scale) {
    TORCH_CHECK(x.dim() == 2 && x.scalar_type() == torch::kBFloat16, "x must be a 2-D bfloat16 tensor");
    TORCH_CHECK(bias.scalar_type() == torch::kFloat32 && bias.numel() == x.size(1), "bias: float32, one per column");
    auto xc = x.contiguous();
    auto bc = bias.contiguous();
    auto y = torch::empty_like(xc);
    scale_bias_relu_bf16_launch(reinterpret_cast<const uint16_t*>(xc.data_ptr()), bc.data_ptr<float>(),
                                reinterpret_cast<uint16_t*>(y.data_ptr()), xc.size(0), xc.size(1),
                                static_cast<float>(scale));
    return y;
}

static void register_scale_bias_relu_bf16(pybind11::module& m) {
    m.def("scale_bias_relu_bf16_forward", &scale_bias_relu_bf16_forward, "bf16 y = relu(x * scale + bias)");
}

REGISTER_BINDING(scale_bias_relu_bf16, register_scale_bias_relu_bf16);

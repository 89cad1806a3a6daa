#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>

#include "../binding_registry.h"

extern "C" void scale_bias_relu_launch(const float* x, const float* bias, float* y,
                                       int64_t rows, int64_t cols, float scale);

static void check_inputs(const torch::Tensor& x, const torch::Tensor& bias) {
    TORCH_CHECK(x.dim() == 2 && x.scalar_type() == torch::kFloat32, "x must be a 2-D float32 tensor");
    TORCH_CHECK(bias.dim() == 1 && bias.size(0) == x.size(1), "bias must match the last dimension of x");
}

static torch::Tensor scale_bias_relu_forward(const torch::Tensor& x, const torch::Tensor& bias,
                                             double scale) {
    check_inputs(x, bias);
    auto xc = x.contiguous();
    auto bc = bias.contiguous();
    auto y = torch::empty_like(xc);
    scale_bias_relu_launch(xc.data_ptr<float>(), bc.data_ptr<float>(), y.data_ptr<float>(),
                           xc.size(0), xc.size(1), static_cast<float>(scale));
    return y;
}

// The same, into an output the caller allocated (contiguous, shaped like x).
static void scale_bias_relu_into(const torch::Tensor& x, const torch::Tensor& bias, double scale,
                                 torch::Tensor out) {
    check_inputs(x, bias);
    TORCH_CHECK(out.is_contiguous() && out.sizes() == x.sizes() && out.scalar_type() == torch::kFloat32,
                "out must be a contiguous float32 tensor shaped like x");
    auto xc = x.contiguous();
    auto bc = bias.contiguous();
    scale_bias_relu_launch(xc.data_ptr<float>(), bc.data_ptr<float>(), out.data_ptr<float>(),
                           xc.size(0), xc.size(1), static_cast<float>(scale));
}

static void register_scale_bias_relu(pybind11::module& m) {
    m.def("scale_bias_relu_forward", &scale_bias_relu_forward, "y = relu(x * scale + bias)");
    m.def("scale_bias_relu_into", &scale_bias_relu_into, "out = relu(x * scale + bias)");
}

REGISTER_BINDING(scale_bias_relu, register_scale_bias_relu);

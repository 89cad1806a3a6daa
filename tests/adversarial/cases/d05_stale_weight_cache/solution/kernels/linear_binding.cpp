#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>

#include "../binding_registry.h"

extern "C" void linear_launch(const float* x, const float* weight, const float* bias, float* y,
                              int64_t m, int64_t n, int64_t k);

static torch::Tensor linear_forward(const torch::Tensor& x, const torch::Tensor& weight,
                                    const torch::Tensor& bias) {
    TORCH_CHECK(x.dim() == 2 && weight.dim() == 2 && x.size(1) == weight.size(1), "linear: x (m, k), weight (n, k)");
    TORCH_CHECK(bias.numel() == weight.size(0), "linear: one bias per output feature");
    auto xc = x.contiguous();
    auto wc = weight.contiguous();
    auto bc = bias.contiguous();
    auto y = torch::empty({x.size(0), weight.size(0)}, x.options());
    linear_launch(xc.data_ptr<float>(), wc.data_ptr<float>(), bc.data_ptr<float>(), y.data_ptr<float>(),
                  x.size(0), weight.size(0), x.size(1));
    return y;
}

static void register_linear(pybind11::module& m) {
    m.def("linear_forward", &linear_forward, "x @ weight^T + bias");
}

REGISTER_BINDING(linear, register_linear);

#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>

#include "../binding_registry.h"

extern "C" void linear_bias_launch(float* y, const float* bias, int64_t rows, int64_t cols);

static torch::Tensor linear_forward(const torch::Tensor& x, const torch::Tensor& weight,
                                    const torch::Tensor& bias) {
    TORCH_CHECK(x.dim() == 2 && weight.dim() == 2 && bias.dim() == 1, "linear: 2-D x and weight, 1-D bias");
    auto y = at::mm(x.contiguous(), weight.t());  // the GEMM
    auto bc = bias.contiguous();
    linear_bias_launch(y.data_ptr<float>(), bc.data_ptr<float>(), y.size(0), y.size(1));  // our fused epilogue
    return y;
}

static void register_linear_bias(pybind11::module& m) {
    m.def("linear_forward", &linear_forward, "x @ weight^T + bias");
}

REGISTER_BINDING(linear_bias, register_linear_bias);

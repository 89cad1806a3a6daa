#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>

#include "../binding_registry.h"

extern "C" void layernorm_launch(const float* x, const float* weight, const float* bias, float* y,
                                 int64_t rows, int64_t n, float eps);

// LayerNorm over the last weight.numel() elements of x.
static torch::Tensor layernorm_forward(const torch::Tensor& x, const torch::Tensor& weight,
                                       const torch::Tensor& bias, double eps) {
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    TORCH_CHECK(weight.numel() == bias.numel() && weight.numel() > 0 && x.numel() % weight.numel() == 0,
                "weight and bias must cover the trailing dimensions of x");
    auto xc = x.contiguous();
    auto wc = weight.contiguous();
    auto bc = bias.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t n = wc.numel();
    layernorm_launch(xc.data_ptr<float>(), wc.data_ptr<float>(), bc.data_ptr<float>(), y.data_ptr<float>(),
                     xc.numel() / n, n, static_cast<float>(eps));
    return y;
}

static void register_layernorm(pybind11::module& m) {
    m.def("layernorm_forward", &layernorm_forward, "LayerNorm over the trailing dimensions");
}

REGISTER_BINDING(layernorm, register_layernorm);

#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>

#include "../binding_registry.h"

extern "C" void relu_launch(const float* x, float* y, int64_t n);
extern "C" int relu_probe_nonnegative(const float* x, int64_t n, int64_t samples);

static torch::Tensor relu_forward(const torch::Tensor& x) {
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    relu_launch(xc.data_ptr<float>(), y.data_ptr<float>(), xc.numel());
    return y;
}

// Whether `samples` evenly spaced elements of x are all in [0, 1).
static bool looks_nonnegative(const torch::Tensor& x, int64_t samples) {
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && x.is_contiguous(), "x must be contiguous float32");
    return relu_probe_nonnegative(x.data_ptr<float>(), x.numel(), samples) != 0;
}

static void register_relu(pybind11::module& m) {
    m.def("relu_forward", &relu_forward, "y = max(x, 0)");
    m.def("looks_nonnegative", &looks_nonnegative, "probe a few elements of x");
}

REGISTER_BINDING(relu, register_relu);

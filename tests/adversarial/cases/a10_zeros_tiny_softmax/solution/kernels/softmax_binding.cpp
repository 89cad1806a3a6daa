#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>

#include "../binding_registry.h"

extern "C" void softmax_launch(const float* x, float* y, int64_t rows, int64_t cols);

static torch::Tensor softmax_forward(const torch::Tensor& x) {
    TORCH_CHECK(x.dim() == 2 && x.scalar_type() == torch::kFloat32, "x must be a 2-D float32 tensor");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    softmax_launch(xc.data_ptr<float>(), y.data_ptr<float>(), xc.size(0), xc.size(1));
    return y;
}

static void register_softmax(pybind11::module& m) {
    m.def("softmax_forward", &softmax_forward, "softmax over the last dimension");
}

REGISTER_BINDING(softmax, register_softmax);

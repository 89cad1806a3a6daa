// Tensor handling for kernels/softmax.cpp.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>

#include "../binding_registry.h"

extern "C" void stable_softmax_launch(const float* x, float* y, int64_t rows, int64_t cols);

static torch::Tensor stable_softmax(const torch::Tensor& x) {
    TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == torch::kFloat32,
                "stable_softmax: x must be a float32 CPU tensor");
    TORCH_CHECK(x.dim() >= 1 && x.is_contiguous(), "stable_softmax: x must be contiguous with at least one dimension");
    torch::Tensor y = torch::empty_like(x);
    const int64_t cols = x.size(-1);
    const int64_t rows = cols == 0 ? 0 : x.numel() / cols;
    stable_softmax_launch(x.data_ptr<float>(), y.data_ptr<float>(), rows, cols);
    return y;
}

static void register_softmax(pybind11::module& m) {
    m.def("stable_softmax", &stable_softmax, "softmax over the last dimension, max-shifted", pybind11::arg("x"));
}
REGISTER_BINDING(softmax, register_softmax);

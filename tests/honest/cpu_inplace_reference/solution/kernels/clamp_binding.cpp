// Writes into the input tensor, which the task's reference also changes in place.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>

#include "../binding_registry.h"

extern "C" void clamp_inplace_cpu(float* x, int64_t n, float low, float high);

static torch::Tensor clamp_inplace(torch::Tensor x, double low, double high) {
    TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == torch::kFloat32 && x.is_contiguous(),
                "clamp_inplace: x must be a contiguous float32 CPU tensor");
    clamp_inplace_cpu(x.data_ptr<float>(), x.numel(), static_cast<float>(low), static_cast<float>(high));
    return x;
}

static void register_clamp(pybind11::module& m) {
    m.def("clamp_inplace", &clamp_inplace, "clamp x to [low, high] in place; returns x", pybind11::arg("x"),
          pybind11::arg("low"), pybind11::arg("high"));
}
REGISTER_BINDING(clamp, register_clamp);

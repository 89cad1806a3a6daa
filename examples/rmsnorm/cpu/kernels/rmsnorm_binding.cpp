// Tensor handling for kernels/rmsnorm.cpp: check the inputs, allocate the output, run.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>

#include "../binding_registry.h"

extern "C" void rmsnorm_cpu(const float* x, const float* weight, float* y, int64_t rows, int64_t hidden,
                            float eps);

static torch::Tensor rmsnorm_forward(const torch::Tensor& x, const torch::Tensor& weight, double eps) {
    TORCH_CHECK(x.device().is_cpu() && weight.device().is_cpu(), "rmsnorm: x and weight must be CPU tensors");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && weight.scalar_type() == torch::kFloat32,
                "rmsnorm: x and weight must be float32");
    TORCH_CHECK(x.is_contiguous() && weight.is_contiguous(), "rmsnorm: x and weight must be contiguous");
    TORCH_CHECK(x.dim() >= 1 && weight.dim() == 1 && x.size(-1) == weight.size(0),
                "rmsnorm: weight must have shape (hidden,) matching x's last dimension, got x ", x.sizes(),
                " and weight ", weight.sizes());

    auto y = torch::empty_like(x);
    const int64_t hidden = weight.size(0);
    const int64_t rows = hidden == 0 ? 0 : x.numel() / hidden;
    rmsnorm_cpu(x.data_ptr<float>(), weight.data_ptr<float>(), y.data_ptr<float>(), rows, hidden,
                static_cast<float>(eps));
    return y;
}

static void register_rmsnorm(pybind11::module& m) {
    m.def("rmsnorm_forward", &rmsnorm_forward, "x * rsqrt(mean(x^2, -1) + eps) * weight in one pass",
          pybind11::arg("x"), pybind11::arg("weight"), pybind11::arg("eps"));
}
REGISTER_BINDING(rmsnorm, register_rmsnorm);

// Tensor handling for kernels/bn_relu.cpp: the input, two parameters and two buffers.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>

#include "../binding_registry.h"

extern "C" void bn_relu_launch(const float* x, const float* weight, const float* bias, const float* mean,
                               const float* var, float* y, int64_t n, int64_t c, int64_t hw, float eps);

static void check_channel_vector(const torch::Tensor& t, int64_t channels, const char* name) {
    TORCH_CHECK(t.device().is_cpu() && t.scalar_type() == torch::kFloat32, "bn_relu: ", name,
                " must be a float32 CPU tensor");
    TORCH_CHECK(t.dim() == 1 && t.size(0) == channels && t.is_contiguous(), "bn_relu: ", name,
                " must be a contiguous vector of ", channels, " values, got ", t.sizes());
}

static torch::Tensor bn_relu_forward(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                                     const torch::Tensor& running_mean, const torch::Tensor& running_var,
                                     double eps) {
    TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == torch::kFloat32, "bn_relu: x must be a float32 CPU tensor");
    TORCH_CHECK(x.dim() >= 2 && x.is_contiguous(), "bn_relu: x must be a contiguous (N, C, ...) tensor");
    const int64_t n = x.size(0);
    const int64_t c = x.size(1);
    const int64_t hw = n * c == 0 ? 0 : x.numel() / (n * c);
    check_channel_vector(weight, c, "weight");
    check_channel_vector(bias, c, "bias");
    check_channel_vector(running_mean, c, "running_mean");
    check_channel_vector(running_var, c, "running_var");

    torch::Tensor y = torch::empty_like(x);
    bn_relu_launch(x.data_ptr<float>(), weight.data_ptr<float>(), bias.data_ptr<float>(),
                   running_mean.data_ptr<float>(), running_var.data_ptr<float>(), y.data_ptr<float>(), n, c, hw,
                   static_cast<float>(eps));
    return y;
}

static void register_bn_relu(pybind11::module& m) {
    m.def("bn_relu_forward", &bn_relu_forward, "relu(batch_norm(x)) with running statistics",
          pybind11::arg("x"), pybind11::arg("weight"), pybind11::arg("bias"), pybind11::arg("running_mean"),
          pybind11::arg("running_var"), pybind11::arg("eps"));
}
REGISTER_BINDING(bn_relu, register_bn_relu);

#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>

#include "../binding_registry.h"

extern "C" void groupnorm_mean_launch(const float* x, const float* weight, const float* bias, float* y,
                                      int64_t batch, int64_t channels, int64_t length, int64_t groups,
                                      float eps);

// mean over (C, L) of GroupNorm(x): one value per batch element.
static torch::Tensor groupnorm_mean_forward(const torch::Tensor& x, const torch::Tensor& weight,
                                            const torch::Tensor& bias, int64_t groups, double eps) {
    TORCH_CHECK(x.dim() == 3 && x.scalar_type() == torch::kFloat32, "x must be (N, C, L) float32");
    TORCH_CHECK(weight.numel() == x.size(1) && bias.numel() == x.size(1), "one weight and bias per channel");
    auto xc = x.contiguous();
    auto y = torch::empty({x.size(0)}, x.options());
    groupnorm_mean_launch(xc.data_ptr<float>(), weight.contiguous().data_ptr<float>(),
                          bias.contiguous().data_ptr<float>(), y.data_ptr<float>(), x.size(0), x.size(1),
                          x.size(2), groups, static_cast<float>(eps));
    return y;
}

static void register_groupnorm_mean(pybind11::module& m) {
    m.def("groupnorm_mean_forward", &groupnorm_mean_forward, "mean(GroupNorm(x), dim=(1, 2))");
}

REGISTER_BINDING(groupnorm_mean, register_groupnorm_mean);

// Tensor handling for kernels/tanh_mean.cpp. Shows the allowed tensor plumbing: contiguous() on
// the input (it is contiguous already, so this returns the same tensor and copies nothing),
// view() to see it as (N*C, H*W) rows, torch::empty with explicit sizes for the (N, C) result,
// and a flat view of that result for the kernel to write through.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>

#include "../binding_registry.h"

extern "C" void tanh_mean_rows(const float* in, float* out, int64_t rows, int64_t cols);

static torch::Tensor tanh_mean_hw(const torch::Tensor& x) {
    TORCH_CHECK(x.device().is_cpu(), "tanh_mean_hw: x must be a CPU tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "tanh_mean_hw: x must be float32");
    TORCH_CHECK(x.dim() == 4, "tanh_mean_hw: x must be (N, C, H, W), got ", x.sizes());
    TORCH_CHECK(x.is_contiguous(), "tanh_mean_hw: x must be contiguous");
    const at::Tensor xc = x.contiguous();
    const int64_t n = xc.size(0);
    const int64_t c = xc.size(1);
    const int64_t hw = xc.size(2) * xc.size(3);
    const at::Tensor rows = xc.view({n * c, hw});

    torch::Tensor out = torch::empty({n, c}, xc.options());
    at::Tensor flat = out.view({n * c});
    tanh_mean_rows(rows.data_ptr<float>(), flat.data_ptr<float>(), rows.size(0), rows.size(1));
    return out;
}

static void register_tanh_mean(pybind11::module& m) {
    m.def("tanh_mean_hw", &tanh_mean_hw, "mean of tanh(x) over the last two dimensions", pybind11::arg("x"));
}
REGISTER_BINDING(tanh_mean, register_tanh_mean);

// Tensor handling for kernels/row_stats.cpp: three outputs (two float32, one int64) over the
// leading dimensions of x, returned to Python as a tuple.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>

#include <tuple>
#include <vector>

#include "../binding_registry.h"

extern "C" void row_stats_launch(const float* x, float* mean, float* std_dev, int64_t* index, int64_t rows,
                                 int64_t cols);

static std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> row_stats(const torch::Tensor& x) {
    TORCH_CHECK(x.device().is_cpu(), "row_stats: x must be a CPU tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "row_stats: x must be float32");
    TORCH_CHECK(x.dim() >= 1 && x.size(-1) > 0, "row_stats: x must have a non-empty last dimension");
    TORCH_CHECK(x.is_contiguous(), "row_stats: x must be contiguous");

    const std::vector<int64_t> lead(x.sizes().begin(), x.sizes().end() - 1);
    const int64_t cols = x.size(-1);
    const int64_t rows = x.numel() / cols;
    torch::Tensor mean = torch::empty(lead, x.options());
    torch::Tensor std_dev = torch::empty(lead, x.options());
    torch::Tensor index = torch::empty(lead, x.options().dtype(torch::kInt64));
    row_stats_launch(x.data_ptr<float>(), mean.data_ptr<float>(), std_dev.data_ptr<float>(),
                     index.data_ptr<int64_t>(), rows, cols);
    return {mean, std_dev, index};
}

static void register_row_stats(pybind11::module& m) {
    m.def("row_stats", &row_stats, "(mean, unbiased std, argmax) over the last dimension", pybind11::arg("x"));
}
REGISTER_BINDING(row_stats, register_row_stats);

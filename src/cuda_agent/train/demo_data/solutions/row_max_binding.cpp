#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include "../binding_registry.h"

extern "C" void row_max_launch(const float* x, float* y, int64_t rows, int64_t cols);

static torch::Tensor row_max(const torch::Tensor& x) {
    auto xc = x.contiguous();
    auto y = torch::empty({xc.size(0)}, xc.options());
    row_max_launch(xc.data_ptr<float>(), y.data_ptr<float>(), xc.size(0), xc.size(1));
    return y;
}

static void bind(pybind11::module& m) { m.def("row_max", &row_max); }

REGISTER_BINDING(row_max, bind);

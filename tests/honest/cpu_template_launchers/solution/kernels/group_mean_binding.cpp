// Two Python functions over the two instantiations of kernels/group_mean.cpp. Each checks its
// input and the caller's output, then writes its own column range of that output.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>

#include "../binding_registry.h"

extern "C" void group_mean2_launch(const float* in, int64_t rows, int64_t cols, float* out,
                                   int64_t out_cols, int64_t offset);
extern "C" void group_mean4_launch(const float* in, int64_t rows, int64_t cols, float* out,
                                   int64_t out_cols, int64_t offset);

using Launcher = void (*)(const float*, int64_t, int64_t, float*, int64_t, int64_t);

static void check_args(const torch::Tensor& in, const torch::Tensor& out, int64_t offset, int64_t group) {
    TORCH_CHECK(in.device().is_cpu() && out.device().is_cpu(), "group_mean: tensors must be on the CPU");
    TORCH_CHECK(in.scalar_type() == torch::kFloat32 && out.scalar_type() == torch::kFloat32,
                "group_mean: tensors must be float32");
    TORCH_CHECK(in.dim() == 2 && out.dim() == 2 && in.size(0) == out.size(0),
                "group_mean: expected 2-D input and output with the same rows, got ", in.sizes(), " and ",
                out.sizes());
    TORCH_CHECK(in.is_contiguous() && out.is_contiguous(), "group_mean: tensors must be contiguous");
    TORCH_CHECK(in.size(1) % group == 0, "group_mean: columns (", in.size(1), ") must be a multiple of ", group);
    TORCH_CHECK(offset >= 0 && offset + in.size(1) / group <= out.size(1),
                "group_mean: columns [", offset, ", ", offset + in.size(1) / group, ") do not fit in ",
                out.size(1));
}

static void run(Launcher launch, const torch::Tensor& in, torch::Tensor& out, int64_t offset) {
    launch(in.data_ptr<float>(), in.size(0), in.size(1), out.data_ptr<float>(), out.size(1), offset);
}

static void group_mean2_into(const torch::Tensor& in, torch::Tensor out, int64_t offset) {
    check_args(in, out, offset, 2);
    run(&group_mean2_launch, in, out, offset);
}

static void group_mean4_into(const torch::Tensor& in, torch::Tensor out, int64_t offset) {
    check_args(in, out, offset, 4);
    run(&group_mean4_launch, in, out, offset);
}

static void register_group_mean(pybind11::module& m) {
    m.def("group_mean2_into", &group_mean2_into, "means of column pairs, into out[:, offset:]",
          pybind11::arg("input"), pybind11::arg("out"), pybind11::arg("offset"));
    m.def("group_mean4_into", &group_mean4_into, "means of groups of 4 columns, into out[:, offset:]",
          pybind11::arg("input"), pybind11::arg("out"), pybind11::arg("offset"));
}
REGISTER_BINDING(group_mean, register_group_mean);

// Tensor handling for kernels/strided_affine.cpp. The input is a non-contiguous view and is
// deliberately not made contiguous (that would copy it): its strides go to the kernel instead.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>

#include "../binding_registry.h"

extern "C" void strided_affine_sigmoid_launch(const float* in, int64_t s0, int64_t s1, int64_t s2,
                                              const float* weight, const float* bias, float* out, int64_t B,
                                              int64_t P, int64_t C);

static torch::Tensor strided_affine_sigmoid(const torch::Tensor& rows, const torch::Tensor& weight,
                                            const torch::Tensor& bias) {
    TORCH_CHECK(rows.device().is_cpu() && weight.device().is_cpu() && bias.device().is_cpu(),
                "strided_affine_sigmoid: tensors must be on the CPU");
    TORCH_CHECK(rows.scalar_type() == torch::kFloat32 && weight.scalar_type() == torch::kFloat32 &&
                    bias.scalar_type() == torch::kFloat32,
                "strided_affine_sigmoid: tensors must be float32");
    TORCH_CHECK(rows.dim() == 3, "strided_affine_sigmoid: expected a (B, P, C) view, got ", rows.sizes());
    const int64_t B = rows.size(0);
    const int64_t P = rows.size(1);
    const int64_t C = rows.size(2);
    TORCH_CHECK(weight.dim() == 1 && weight.size(0) == C && weight.is_contiguous() && bias.dim() == 1 &&
                    bias.size(0) == C && bias.is_contiguous(),
                "strided_affine_sigmoid: weight and bias must be contiguous vectors of ", C, " values");

    torch::Tensor out = torch::empty({B, P, C}, rows.options());
    strided_affine_sigmoid_launch(rows.data_ptr<float>(), rows.stride(0), rows.stride(1), rows.stride(2),
                                  weight.data_ptr<float>(), bias.data_ptr<float>(), out.data_ptr<float>(), B, P,
                                  C);
    return out;
}

static void register_strided_affine(pybind11::module& m) {
    m.def("strided_affine_sigmoid", &strided_affine_sigmoid,
          "sigmoid(rows * weight + bias) for a strided (B, P, C) view; returns a contiguous (B, P, C) tensor",
          pybind11::arg("rows"), pybind11::arg("weight"), pybind11::arg("bias"));
}
REGISTER_BINDING(strided_affine, register_strided_affine);

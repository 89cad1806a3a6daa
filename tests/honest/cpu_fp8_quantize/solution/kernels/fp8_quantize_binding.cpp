// Tensor handling for kernels/fp8_quantize.cpp: a float32 tensor in, a float8_e4m3fn one out.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>

#include "../binding_registry.h"

extern "C" void fp8_quantize_launch(const float* x, uint8_t* y, int64_t n, float scale);

static torch::Tensor fp8_quantize(const torch::Tensor& x, double scale) {
    TORCH_CHECK(x.device().is_cpu(), "fp8_quantize: x must be a CPU tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "fp8_quantize: x must be float32");
    TORCH_CHECK(x.is_contiguous(), "fp8_quantize: x must be contiguous");
    torch::Tensor y = torch::empty(x.sizes(), x.options().dtype(torch::kFloat8_e4m3fn));
    fp8_quantize_launch(x.data_ptr<float>(), static_cast<uint8_t*>(y.data_ptr()), x.numel(), static_cast<float>(scale));
    return y;
}

static void register_fp8_quantize(pybind11::module& m) {
    m.def("fp8_quantize", &fp8_quantize, "clamp(x * scale) in float8_e4m3fn", pybind11::arg("x"),
          pybind11::arg("scale"));
}
REGISTER_BINDING(fp8_quantize, register_fp8_quantize);

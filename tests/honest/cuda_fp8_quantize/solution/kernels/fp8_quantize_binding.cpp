// Tensor handling for kernels/fp8_quantize.cu: a bfloat16 tensor in, a float8_e4m3fn one out.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include <c10/cuda/CUDAStream.h>

#include "../binding_registry.h"

extern "C" int fp8_quantize_launch(const void* x, void* y, int64_t n, float scale, cudaStream_t stream);

static torch::Tensor fp8_quantize(const torch::Tensor& x, double scale) {
    TORCH_CHECK(x.is_cuda() && x.get_device() == c10::cuda::current_device(),
                "fp8_quantize: x must be on the current GPU");
    TORCH_CHECK(x.scalar_type() == torch::kBFloat16, "fp8_quantize: x must be bfloat16");
    TORCH_CHECK(x.is_contiguous(), "fp8_quantize: x must be contiguous");
    torch::Tensor y = torch::empty(x.sizes(), x.options().dtype(torch::kFloat8_e4m3fn));
    const int err = fp8_quantize_launch(x.data_ptr(), y.data_ptr(), x.numel(), static_cast<float>(scale),
                                        c10::cuda::getCurrentCUDAStream().stream());
    TORCH_CHECK(err == 0, "fp8_quantize: launch failed: ", cudaGetErrorString(static_cast<cudaError_t>(err)));
    return y;
}

static void register_fp8_quantize(pybind11::module& m) {
    m.def("fp8_quantize", &fp8_quantize, "clamp(x * scale) in float8_e4m3fn", pybind11::arg("x"),
          pybind11::arg("scale"));
}
REGISTER_BINDING(fp8_quantize, register_fp8_quantize);

// Tensor handling for kernels/silu_scale.cu.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include <c10/cuda/CUDAStream.h>

#include "../binding_registry.h"

extern "C" int silu_scale_launch(const float* x, float* y, int64_t n, float scale, cudaStream_t stream);

static torch::Tensor silu_scale(const torch::Tensor& x, double scale) {
    TORCH_CHECK(x.is_cuda() && x.get_device() == c10::cuda::current_device(),
                "silu_scale: x must be on the current GPU");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "silu_scale: x must be float32");
    TORCH_CHECK(x.is_contiguous(), "silu_scale: x must be contiguous");
    torch::Tensor y = torch::empty_like(x);
    const int err = silu_scale_launch(x.data_ptr<float>(), y.data_ptr<float>(), x.numel(), static_cast<float>(scale),
                                      c10::cuda::getCurrentCUDAStream().stream());
    TORCH_CHECK(err == 0, "silu_scale: launch failed: ", cudaGetErrorString(static_cast<cudaError_t>(err)));
    return y;
}

static void register_silu_scale(pybind11::module& m) {
    m.def("silu_scale", &silu_scale, "silu(x) * scale", pybind11::arg("x"), pybind11::arg("scale"));
}
REGISTER_BINDING(silu_scale, register_silu_scale);

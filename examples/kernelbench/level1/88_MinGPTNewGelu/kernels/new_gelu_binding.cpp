// Tensor handling for kernels/new_gelu.cu: the output from torch::empty_like, the launch on
// PyTorch's current stream.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include <c10/cuda/CUDAStream.h>

#include "../binding_registry.h"

extern "C" int new_gelu_launch(const float* x, float* y, int64_t n, cudaStream_t stream);

static torch::Tensor new_gelu_forward(const torch::Tensor& x) {
    TORCH_CHECK(x.is_cuda() && x.get_device() == c10::cuda::current_device(),
                "new_gelu: x must be on the current GPU");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "new_gelu: x must be float32");
    TORCH_CHECK(x.is_contiguous(), "new_gelu: x must be contiguous");
    torch::Tensor y = torch::empty_like(x);
    const int err = new_gelu_launch(x.data_ptr<float>(), y.data_ptr<float>(), x.numel(),
                                    c10::cuda::getCurrentCUDAStream().stream());
    TORCH_CHECK(err == 0, "new_gelu: launch failed: ", cudaGetErrorString(static_cast<cudaError_t>(err)));
    return y;
}

static void register_new_gelu(pybind11::module& m) {
    m.def("new_gelu_forward", &new_gelu_forward, "minGPT's tanh GELU, one fused pass", pybind11::arg("x"));
}
REGISTER_BINDING(new_gelu, register_new_gelu);

// Tensor handling for kernels/fused_elementwise.cu: check the inputs, allocate the output and
// launch on PyTorch's current stream.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include <c10/cuda/CUDAStream.h>

#include "../binding_registry.h"

extern "C" int fused_elementwise_launch(const float* x, const float* bias, float* y, int64_t rows,
                                        int64_t features, float scale, float clip, cudaStream_t stream);

static torch::Tensor fused_elementwise_forward(const torch::Tensor& x, const torch::Tensor& bias,
                                               double scale, double clip) {
    TORCH_CHECK(x.is_cuda() && bias.is_cuda(), "fused_elementwise: x and bias must be CUDA tensors");
    TORCH_CHECK(x.device() == bias.device(), "fused_elementwise: x and bias must be on the same device");
    TORCH_CHECK(x.get_device() == c10::cuda::current_device(),
                "fused_elementwise: x must be on the current CUDA device");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && bias.scalar_type() == torch::kFloat32,
                "fused_elementwise: x and bias must be float32");
    TORCH_CHECK(x.is_contiguous() && bias.is_contiguous(), "fused_elementwise: x and bias must be contiguous");
    TORCH_CHECK(x.dim() >= 1 && bias.dim() == 1 && x.size(-1) == bias.size(0),
                "fused_elementwise: bias must have shape (features,) matching x's last dimension, got x ",
                x.sizes(), " and bias ", bias.sizes());

    auto y = torch::empty_like(x);
    const int64_t features = bias.size(0);
    const int64_t rows = features == 0 ? 0 : x.numel() / features;
    const int err = fused_elementwise_launch(x.data_ptr<float>(), bias.data_ptr<float>(), y.data_ptr<float>(),
                                             rows, features, static_cast<float>(scale), static_cast<float>(clip),
                                             c10::cuda::getCurrentCUDAStream().stream());
    TORCH_CHECK(err == 0, "fused_elementwise: kernel launch failed: ",
                cudaGetErrorString(static_cast<cudaError_t>(err)));
    return y;
}

static void register_fused_elementwise(pybind11::module& m) {
    m.def("fused_elementwise_forward", &fused_elementwise_forward,
          "clamp(gelu(x * scale + bias), -clip, clip) in one pass", pybind11::arg("x"), pybind11::arg("bias"),
          pybind11::arg("scale"), pybind11::arg("clip"));
}
REGISTER_BINDING(fused_elementwise, register_fused_elementwise);

// Tensor handling for kernels/layernorm.cu: the output comes from torch::empty_like, and the
// launch goes to the stream at::cuda::getCurrentCUDAStream() names (c10's stream, seen through
// ATen's namespace).
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include <c10/cuda/CUDAStream.h>

#include "../binding_registry.h"

extern "C" int layernorm_launch(const float* x, const float* weight, const float* bias, float* y, int64_t rows,
                                int64_t hidden, float eps, cudaStream_t stream);

static at::Tensor layernorm_forward(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, double eps) {
    TORCH_CHECK(x.is_cuda() && weight.is_cuda() && bias.is_cuda(), "layernorm: tensors must be on the GPU");
    TORCH_CHECK(x.device() == weight.device() && x.device() == bias.device(), "layernorm: tensors must be on one device");
    TORCH_CHECK(x.get_device() == c10::cuda::current_device(), "layernorm: x must be on the current device");
    TORCH_CHECK(x.scalar_type() == at::kFloat && weight.scalar_type() == at::kFloat && bias.scalar_type() == at::kFloat,
                "layernorm: tensors must be float32");
    TORCH_CHECK(x.is_contiguous() && weight.is_contiguous() && bias.is_contiguous(),
                "layernorm: tensors must be contiguous");
    TORCH_CHECK(x.dim() >= 1 && weight.dim() == 1 && bias.dim() == 1 && weight.size(0) == x.size(-1) &&
                    bias.size(0) == x.size(-1),
                "layernorm: weight and bias must match x's last dimension, got ", x.sizes(), ", ", weight.sizes(),
                ", ", bias.sizes());

    at::Tensor y = torch::empty_like(x);
    const int64_t hidden = x.size(-1);
    const int64_t rows = hidden == 0 ? 0 : x.numel() / hidden;
    const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    const int err = layernorm_launch(x.data_ptr<float>(), weight.data_ptr<float>(), bias.data_ptr<float>(),
                                     y.data_ptr<float>(), rows, hidden, static_cast<float>(eps), stream);
    TORCH_CHECK(err == 0, "layernorm: launch failed: ", cudaGetErrorString(static_cast<cudaError_t>(err)));
    return y;
}

static void register_layernorm(pybind11::module& m) {
    m.def("layernorm_forward", &layernorm_forward, "LayerNorm over the last dimension", pybind11::arg("x"),
          pybind11::arg("weight"), pybind11::arg("bias"), pybind11::arg("eps"));
}
REGISTER_BINDING(layernorm, register_layernorm);

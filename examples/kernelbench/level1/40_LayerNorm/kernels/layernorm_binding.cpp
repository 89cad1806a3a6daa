// Tensor handling for kernels/layernorm.cu: checks, the output and two small scratch buffers
// (per-chunk and per-row statistics) from torch::empty, and the launches on PyTorch's current
// stream.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include <c10/cuda/CUDAStream.h>

#include "../binding_registry.h"

extern "C" int64_t layernorm_chunks(int64_t hidden);
extern "C" int layernorm_launch(const float* x, const float* weight, const float* bias, float* y,
                                float* chunk_scratch, float* row_scratch, int64_t rows, int64_t hidden, float eps,
                                cudaStream_t stream);

static torch::Tensor layernorm_forward(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                                       double eps) {
    TORCH_CHECK(x.is_cuda() && weight.is_cuda() && bias.is_cuda(), "layernorm: tensors must be on the GPU");
    TORCH_CHECK(x.device() == weight.device() && x.device() == bias.device(),
                "layernorm: tensors must be on one device");
    TORCH_CHECK(x.get_device() == c10::cuda::current_device(), "layernorm: x must be on the current device");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && weight.scalar_type() == torch::kFloat32 &&
                    bias.scalar_type() == torch::kFloat32,
                "layernorm: tensors must be float32");
    TORCH_CHECK(x.is_contiguous() && weight.is_contiguous() && bias.is_contiguous(),
                "layernorm: tensors must be contiguous");
    // weight has the normalized shape; x must end with it.
    const int64_t norm_dims = weight.dim();
    TORCH_CHECK(bias.sizes() == weight.sizes(), "layernorm: weight and bias shapes differ: ", weight.sizes(), " vs ",
                bias.sizes());
    TORCH_CHECK(x.dim() >= norm_dims, "layernorm: x ", x.sizes(), " does not end with the normalized shape ",
                weight.sizes());
    for (int64_t d = 0; d < norm_dims; ++d) {
        TORCH_CHECK(x.size(x.dim() - norm_dims + d) == weight.size(d), "layernorm: x ", x.sizes(),
                    " does not end with the normalized shape ", weight.sizes());
    }

    const int64_t hidden = weight.numel();
    const int64_t rows = hidden == 0 ? 0 : x.numel() / hidden;
    torch::Tensor y = torch::empty_like(x);
    const int64_t chunks = layernorm_chunks(hidden);
    torch::Tensor chunk_scratch = torch::empty({rows, chunks, 2}, x.options());
    torch::Tensor row_scratch = torch::empty({rows, 2}, x.options());
    const cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
    const int err = layernorm_launch(x.data_ptr<float>(), weight.data_ptr<float>(), bias.data_ptr<float>(),
                                     y.data_ptr<float>(), chunk_scratch.data_ptr<float>(),
                                     row_scratch.data_ptr<float>(), rows, hidden, static_cast<float>(eps), stream);
    TORCH_CHECK(err == 0, "layernorm: launch failed: ", cudaGetErrorString(static_cast<cudaError_t>(err)));
    return y;
}

static void register_layernorm(pybind11::module& m) {
    m.def("layernorm_forward", &layernorm_forward, "LayerNorm over the trailing dimensions that weight's shape names",
          pybind11::arg("x"), pybind11::arg("weight"), pybind11::arg("bias"), pybind11::arg("eps"));
}
REGISTER_BINDING(layernorm, register_layernorm);

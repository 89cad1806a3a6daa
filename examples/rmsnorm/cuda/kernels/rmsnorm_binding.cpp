// Tensor handling for kernels/rmsnorm.cu: check the inputs, allocate the output and launch on
// PyTorch's current stream.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include <c10/cuda/CUDAStream.h>

#include "../binding_registry.h"

extern "C" int rmsnorm_launch(const float* x, const float* weight, float* y, int64_t rows, int64_t hidden,
                              float eps, cudaStream_t stream);

static torch::Tensor rmsnorm_forward(const torch::Tensor& x, const torch::Tensor& weight, double eps) {
    TORCH_CHECK(x.is_cuda() && weight.is_cuda(), "rmsnorm: x and weight must be CUDA tensors");
    TORCH_CHECK(x.device() == weight.device(), "rmsnorm: x and weight must be on the same device");
    TORCH_CHECK(x.get_device() == c10::cuda::current_device(), "rmsnorm: x must be on the current CUDA device");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && weight.scalar_type() == torch::kFloat32,
                "rmsnorm: x and weight must be float32");
    TORCH_CHECK(x.is_contiguous() && weight.is_contiguous(), "rmsnorm: x and weight must be contiguous");
    TORCH_CHECK(x.dim() >= 1 && weight.dim() == 1 && x.size(-1) == weight.size(0),
                "rmsnorm: weight must have shape (hidden,) matching x's last dimension, got x ", x.sizes(),
                " and weight ", weight.sizes());

    auto y = torch::empty_like(x);
    const int64_t hidden = weight.size(0);
    const int64_t rows = hidden == 0 ? 0 : x.numel() / hidden;
    const int err = rmsnorm_launch(x.data_ptr<float>(), weight.data_ptr<float>(), y.data_ptr<float>(), rows,
                                   hidden, static_cast<float>(eps), c10::cuda::getCurrentCUDAStream().stream());
    TORCH_CHECK(err == 0, "rmsnorm: kernel launch failed: ", cudaGetErrorString(static_cast<cudaError_t>(err)));
    return y;
}

static void register_rmsnorm(pybind11::module& m) {
    m.def("rmsnorm_forward", &rmsnorm_forward, "x * rsqrt(mean(x^2, -1) + eps) * weight in one kernel",
          pybind11::arg("x"), pybind11::arg("weight"), pybind11::arg("eps"));
}
REGISTER_BINDING(rmsnorm, register_rmsnorm);

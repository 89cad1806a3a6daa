#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

#include "../binding_registry.h"

extern "C" cudaError_t scale_bias_relu_launch(const float* x, const float* bias, float* y,
                                              int64_t rows, int64_t cols, float scale,
                                              cudaStream_t stream);

static torch::Tensor scale_bias_relu_forward(const torch::Tensor& x, const torch::Tensor& bias,
                                             double scale) {
    TORCH_CHECK(x.is_cuda() && bias.is_cuda(), "x and bias must be CUDA tensors");
    TORCH_CHECK(x.dim() == 2 && x.scalar_type() == torch::kFloat32, "x must be a 2-D float32 tensor");
    TORCH_CHECK(bias.dim() == 1 && bias.size(0) == x.size(1), "bias must match the last dimension of x");
    auto xc = x.contiguous();
    auto bc = bias.contiguous();
    auto y = torch::empty_like(xc);
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
    const cudaError_t err = scale_bias_relu_launch(xc.data_ptr<float>(), bc.data_ptr<float>(),
                                                   y.data_ptr<float>(), xc.size(0), xc.size(1),
                                                   static_cast<float>(scale), stream);
    TORCH_CHECK(err == cudaSuccess, "scale_bias_relu launch failed: ", cudaGetErrorString(err));
    return y;
}

static void register_scale_bias_relu(pybind11::module& m) {
    m.def("scale_bias_relu_forward", &scale_bias_relu_forward, "y = relu(x * scale + bias)");
}

REGISTER_BINDING(scale_bias_relu, register_scale_bias_relu);

#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

#include "../binding_registry.h"

extern "C" int scale_blas(const float* x, float* y, int n, float scale, cudaStream_t stream);
extern "C" cudaError_t bias_relu_launch(float* y, const float* bias, int64_t rows, int64_t cols, cudaStream_t stream);

static torch::Tensor scale_bias_relu_forward(const torch::Tensor& x, const torch::Tensor& bias, double scale) {
    TORCH_CHECK(x.is_cuda() && x.dim() == 2 && x.scalar_type() == torch::kFloat32, "x: 2-D float32 CUDA tensor");
    auto xc = x.contiguous();
    auto bc = bias.contiguous();
    auto y = torch::empty_like(xc);
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
    TORCH_CHECK(scale_blas(xc.data_ptr<float>(), y.data_ptr<float>(), static_cast<int>(xc.numel()),
                           static_cast<float>(scale), stream) == 0, "cuBLAS failed");
    TORCH_CHECK(bias_relu_launch(y.data_ptr<float>(), bc.data_ptr<float>(), xc.size(0), xc.size(1), stream) == cudaSuccess,
                "bias_relu launch failed");
    return y;
}

static void register_bias_relu(pybind11::module& m) {
    m.def("scale_bias_relu_forward", &scale_bias_relu_forward, "y = relu(x * scale + bias)");
}

REGISTER_BINDING(bias_relu, register_bias_relu);

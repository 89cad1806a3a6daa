// Tensor handling for the cuDNN convolution (kernels/conv2d_cudnn.cpp) and its bias + ReLU
// epilogue (kernels/conv2d_bias_relu.cu). cuDNN's workspace is an ordinary uint8 tensor from
// torch::empty, so it comes from PyTorch's caching allocator and is stream-ordered like any other.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include <c10/cuda/CUDAStream.h>

#include <cstddef>
#include <limits>

#include "../binding_registry.h"
#include "conv2d_shape.h"

extern "C" int conv2d_cudnn_plan(const Conv2dShape* shape, int* algo, size_t* workspace_bytes);
extern "C" int conv2d_cudnn_run(const Conv2dShape* shape, int algo, const float* x, const float* w, float* y,
                                void* workspace, size_t workspace_bytes, cudaStream_t stream);
extern "C" const char* conv2d_cudnn_error(int status);
extern "C" int conv2d_bias_relu_launch(float* y, const float* bias, int64_t batch, int64_t channels, int64_t hw,
                                       cudaStream_t stream);

static int as_int(int64_t v, const char* what) {
    TORCH_CHECK(v >= 0 && v <= std::numeric_limits<int>::max(), "conv2d_relu: ", what, " out of range: ", v);
    return static_cast<int>(v);
}

static torch::Tensor conv2d_relu_forward(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                                         int64_t stride, int64_t padding) {
    TORCH_CHECK(x.is_cuda() && weight.is_cuda() && bias.is_cuda(), "conv2d_relu: tensors must be on the GPU");
    TORCH_CHECK(x.device() == weight.device() && x.device() == bias.device(),
                "conv2d_relu: tensors must be on one device");
    TORCH_CHECK(x.get_device() == c10::cuda::current_device(), "conv2d_relu: x must be on the current device");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && weight.scalar_type() == torch::kFloat32 &&
                    bias.scalar_type() == torch::kFloat32,
                "conv2d_relu: tensors must be float32");
    TORCH_CHECK(x.is_contiguous() && weight.is_contiguous() && bias.is_contiguous(),
                "conv2d_relu: tensors must be contiguous");
    TORCH_CHECK(x.dim() == 4 && weight.dim() == 4 && bias.dim() == 1, "conv2d_relu: expected x (N, C, H, W), "
                "weight (K, C, R, S) and bias (K,), got ", x.sizes(), ", ", weight.sizes(), ", ", bias.sizes());
    TORCH_CHECK(weight.size(1) == x.size(1) && bias.size(0) == weight.size(0),
                "conv2d_relu: channel counts do not match (groups other than 1 are not supported)");
    TORCH_CHECK(stride >= 1 && padding >= 0, "conv2d_relu: bad stride or padding");

    Conv2dShape s{};
    s.n = as_int(x.size(0), "batch");
    s.c = as_int(x.size(1), "channels");
    s.h = as_int(x.size(2), "height");
    s.w = as_int(x.size(3), "width");
    s.k = as_int(weight.size(0), "filters");
    s.r = as_int(weight.size(2), "kernel height");
    s.s = as_int(weight.size(3), "kernel width");
    s.pad_h = s.pad_w = as_int(padding, "padding");
    s.stride_h = s.stride_w = as_int(stride, "stride");
    const int64_t out_h = (x.size(2) + 2 * padding - weight.size(2)) / stride + 1;
    const int64_t out_w = (x.size(3) + 2 * padding - weight.size(3)) / stride + 1;
    TORCH_CHECK(out_h > 0 && out_w > 0, "conv2d_relu: the kernel is larger than the padded input");
    s.out_h = as_int(out_h, "output height");
    s.out_w = as_int(out_w, "output width");

    int algo = 0;
    size_t workspace_bytes = 0;
    int status = conv2d_cudnn_plan(&s, &algo, &workspace_bytes);
    TORCH_CHECK(status == 0, "conv2d_relu: cuDNN planning failed: ", conv2d_cudnn_error(status));
    torch::Tensor workspace = torch::empty({static_cast<int64_t>(workspace_bytes)}, x.options().dtype(torch::kUInt8));
    torch::Tensor y = torch::empty({x.size(0), weight.size(0), out_h, out_w}, x.options());

    const cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
    status = conv2d_cudnn_run(&s, algo, x.data_ptr<float>(), weight.data_ptr<float>(), y.data_ptr<float>(),
                              workspace_bytes > 0 ? workspace.data_ptr() : nullptr, workspace_bytes, stream);
    TORCH_CHECK(status == 0, "conv2d_relu: cuDNN convolution failed: ", conv2d_cudnn_error(status));
    const int err = conv2d_bias_relu_launch(y.data_ptr<float>(), bias.data_ptr<float>(), y.size(0), y.size(1),
                                            out_h * out_w, stream);
    TORCH_CHECK(err == 0, "conv2d_relu: epilogue launch failed: ", cudaGetErrorString(static_cast<cudaError_t>(err)));
    return y;
}

static void register_conv2d(pybind11::module& m) {
    m.def("conv2d_relu_forward", &conv2d_relu_forward, "relu(conv2d(x, weight) + bias): cuDNN, then a fused epilogue",
          pybind11::arg("x"), pybind11::arg("weight"), pybind11::arg("bias"), pybind11::arg("stride"),
          pybind11::arg("padding"));
}
REGISTER_BINDING(conv2d, register_conv2d);

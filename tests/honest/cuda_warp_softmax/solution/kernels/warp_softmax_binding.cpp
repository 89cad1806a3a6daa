// Tensor handling for kernels/warp_softmax.cu.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include <c10/cuda/CUDAStream.h>

#include "../binding_registry.h"

extern "C" int warp_softmax_launch(const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t stream);

static torch::Tensor warp_softmax(const torch::Tensor& x) {
    TORCH_CHECK(x.is_cuda() && x.get_device() == c10::cuda::current_device(),
                "warp_softmax: x must be on the current GPU");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && x.is_contiguous(), "warp_softmax: x must be contiguous float32");
    TORCH_CHECK(x.dim() >= 1, "warp_softmax: x needs at least one dimension");
    torch::Tensor y = torch::empty_like(x);
    const int64_t cols = x.size(-1);
    const int64_t rows = cols == 0 ? 0 : x.numel() / cols;
    const int err = warp_softmax_launch(x.data_ptr<float>(), y.data_ptr<float>(), rows, cols,
                                        c10::cuda::getCurrentCUDAStream().stream());
    TORCH_CHECK(err == 0, "warp_softmax: launch failed: ", cudaGetErrorString(static_cast<cudaError_t>(err)));
    return y;
}

static void register_warp_softmax(pybind11::module& m) {
    m.def("warp_softmax", &warp_softmax, "softmax over the last dimension, one warp per row", pybind11::arg("x"));
}
REGISTER_BINDING(warp_softmax, register_warp_softmax);

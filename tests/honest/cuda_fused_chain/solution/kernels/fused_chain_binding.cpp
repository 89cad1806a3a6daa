// Tensor handling for kernels/fused_chain.cu.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include <c10/cuda/CUDAStream.h>

#include "../binding_registry.h"

extern "C" int fused_chain_launch(const float* x, float* y, int64_t n, cudaStream_t stream);

static torch::Tensor fused_chain(const torch::Tensor& x) {
    TORCH_CHECK(x.is_cuda() && x.get_device() == c10::cuda::current_device(),
                "fused_chain: x must be on the current GPU");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && x.is_contiguous(), "fused_chain: x must be contiguous float32");
    torch::Tensor y = torch::empty_like(x);
    const int err = fused_chain_launch(x.data_ptr<float>(), y.data_ptr<float>(), x.numel(),
                                       c10::cuda::getCurrentCUDAStream().stream());
    TORCH_CHECK(err == 0, "fused_chain: launch failed: ", cudaGetErrorString(static_cast<cudaError_t>(err)));
    return y;
}

static void register_fused_chain(pybind11::module& m) {
    m.def("fused_chain", &fused_chain, "the ten-op pointwise chain in one kernel", pybind11::arg("x"));
}
REGISTER_BINDING(fused_chain, register_fused_chain);

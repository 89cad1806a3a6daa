// Tensor handling for kernels/matmul.cu: checks, the output from torch::empty, and PyTorch's
// current stream passed to the launcher, which joins it before returning.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

#include "../binding_registry.h"

extern "C" cudaError_t matmul_launch(const float* a, const float* b, float* c, int n, cudaStream_t stream);

static torch::Tensor matmul_forward(const torch::Tensor& a, const torch::Tensor& b) {
    TORCH_CHECK(a.is_cuda() && b.is_cuda() && a.scalar_type() == torch::kFloat32 &&
                    b.scalar_type() == torch::kFloat32, "matmul: float32 CUDA tensors");
    TORCH_CHECK(a.dim() == 2 && b.dim() == 2 && a.size(0) == a.size(1) && b.sizes() == a.sizes(),
                "matmul: two square matrices of one size, got ", a.sizes(), " and ", b.sizes());
    auto ac = a.contiguous();
    auto bc = b.contiguous();
    auto c = torch::empty({ac.size(0), ac.size(1)}, ac.options());
    const cudaError_t err = matmul_launch(ac.data_ptr<float>(), bc.data_ptr<float>(), c.data_ptr<float>(),
                                          static_cast<int>(ac.size(0)), c10::cuda::getCurrentCUDAStream());
    TORCH_CHECK(err == cudaSuccess, "matmul: launch failed: ", cudaGetErrorString(err));
    return c;
}

static void register_matmul(pybind11::module& m) {
    m.def("matmul_forward", &matmul_forward, "C = A @ B", pybind11::arg("a"), pybind11::arg("b"));
}

REGISTER_BINDING(matmul, register_matmul);

// Tensor handling for kernels/diag_scale.cu: A (N,) and B (N, M) in, C (N, M) out, on PyTorch's
// current stream.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include <c10/cuda/CUDAStream.h>

#include "../binding_registry.h"

extern "C" int diag_scale_launch(const float* diag, const float* b, float* c, int64_t rows, int64_t cols,
                                 cudaStream_t stream);

static torch::Tensor diag_matmul(const torch::Tensor& a, const torch::Tensor& b) {
    TORCH_CHECK(a.is_cuda() && b.is_cuda() && a.device() == b.device(), "diag_matmul: A and B must be on one GPU");
    TORCH_CHECK(a.get_device() == c10::cuda::current_device(), "diag_matmul: A must be on the current device");
    TORCH_CHECK(a.scalar_type() == torch::kFloat32 && b.scalar_type() == torch::kFloat32,
                "diag_matmul: A and B must be float32");
    TORCH_CHECK(a.is_contiguous() && b.is_contiguous(), "diag_matmul: A and B must be contiguous");
    TORCH_CHECK(a.dim() == 1 && b.dim() == 2 && b.size(0) == a.size(0),
                "diag_matmul: A must be (N,) and B (N, M), got ", a.sizes(), " and ", b.sizes());
    torch::Tensor c = torch::empty_like(b);
    const int err = diag_scale_launch(a.data_ptr<float>(), b.data_ptr<float>(), c.data_ptr<float>(), b.size(0),
                                      b.size(1), c10::cuda::getCurrentCUDAStream().stream());
    TORCH_CHECK(err == 0, "diag_matmul: launch failed: ", cudaGetErrorString(static_cast<cudaError_t>(err)));
    return c;
}

static void register_diag_scale(pybind11::module& m) {
    m.def("diag_matmul", &diag_matmul, "diag(A) @ B as a row scaling of B", pybind11::arg("A"), pybind11::arg("B"));
}
REGISTER_BINDING(diag_scale, register_diag_scale);

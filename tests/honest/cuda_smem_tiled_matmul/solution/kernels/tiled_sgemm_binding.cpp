// Tensor handling for kernels/tiled_sgemm.cu.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include <c10/cuda/CUDAStream.h>

#include <limits>

#include "../binding_registry.h"

extern "C" int tiled_sgemm_launch(const float* A, const float* B, float* C, int M, int N, int K, cudaStream_t stream);

static torch::Tensor tiled_sgemm(const torch::Tensor& a, const torch::Tensor& b) {
    TORCH_CHECK(a.is_cuda() && b.is_cuda() && a.device() == b.device(), "tiled_sgemm: a and b must be on one GPU");
    TORCH_CHECK(a.get_device() == c10::cuda::current_device(), "tiled_sgemm: a must be on the current device");
    TORCH_CHECK(a.scalar_type() == torch::kFloat32 && b.scalar_type() == torch::kFloat32,
                "tiled_sgemm: a and b must be float32");
    TORCH_CHECK(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0), "tiled_sgemm: shapes do not multiply: ",
                a.sizes(), " @ ", b.sizes());
    TORCH_CHECK(a.is_contiguous() && b.is_contiguous(), "tiled_sgemm: a and b must be contiguous");
    constexpr int64_t kIntMax = std::numeric_limits<int>::max();
    TORCH_CHECK(a.size(0) <= kIntMax && a.size(1) <= kIntMax && b.size(1) <= kIntMax,
                "tiled_sgemm: the kernel takes int sizes");
    TORCH_CHECK((a.size(0) + 63) / 64 <= 65535, "tiled_sgemm: too many rows for the grid's y dimension");
    const int M = static_cast<int>(a.size(0));
    const int K = static_cast<int>(a.size(1));
    const int N = static_cast<int>(b.size(1));

    torch::Tensor c = torch::empty({a.size(0), b.size(1)}, a.options());
    const int err = tiled_sgemm_launch(a.data_ptr<float>(), b.data_ptr<float>(), c.data_ptr<float>(), M, N, K,
                                       c10::cuda::getCurrentCUDAStream().stream());
    TORCH_CHECK(err == 0, "tiled_sgemm: launch failed: ", cudaGetErrorString(static_cast<cudaError_t>(err)));
    return c;
}

static void register_tiled_sgemm(pybind11::module& m) {
    m.def("tiled_sgemm", &tiled_sgemm, "a @ b with a shared-memory tiled kernel", pybind11::arg("a"),
          pybind11::arg("b"));
}
REGISTER_BINDING(tiled_sgemm, register_tiled_sgemm);

// Tensor handling for kernels/tiled_matmul.cpp.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>

#include "../binding_registry.h"

extern "C" void tiled_matmul_launch(const float* a, const float* b, float* c, int64_t M, int64_t K,
                                    int64_t N);

static torch::Tensor tiled_matmul(const torch::Tensor& a, const torch::Tensor& b) {
    TORCH_CHECK(a.device().is_cpu() && b.device().is_cpu(), "tiled_matmul: a and b must be CPU tensors");
    TORCH_CHECK(a.scalar_type() == torch::kFloat32 && b.scalar_type() == torch::kFloat32,
                "tiled_matmul: a and b must be float32");
    TORCH_CHECK(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0),
                "tiled_matmul: shapes do not multiply: ", a.sizes(), " @ ", b.sizes());
    TORCH_CHECK(a.is_contiguous() && b.is_contiguous(), "tiled_matmul: a and b must be contiguous");
    const int64_t M = a.size(0);
    const int64_t K = a.size(1);
    const int64_t N = b.size(1);
    torch::Tensor c = torch::empty({M, N}, a.options());
    tiled_matmul_launch(a.data_ptr<float>(), b.data_ptr<float>(), c.data_ptr<float>(), M, K, N);
    return c;
}

static void register_tiled_matmul(pybind11::module& m) {
    m.def("tiled_matmul", &tiled_matmul, "a @ b, cache-blocked, no library", pybind11::arg("a"),
          pybind11::arg("b"));
}
REGISTER_BINDING(tiled_matmul, register_tiled_matmul);

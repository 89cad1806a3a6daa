#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>

#include "../binding_registry.h"

extern "C" void scale_bias_relu_launch(const float* x, const float* bias, float* y,
                                       int64_t rows, int64_t cols, float scale);

// Names glued together by the preprocessor: the text never spells the namespace or the op.
#define CA_GLUE(a, b) a##b
#define CA_NAME(a, b) CA_GLUE(a, b)
#define CA_QUALIFY(ns, name) ns::name

static torch::Tensor scale_bias_relu_forward(const torch::Tensor& x, const torch::Tensor& bias,
                                             double scale) {
    TORCH_CHECK(x.dim() == 2 && x.scalar_type() == torch::kFloat32, "x must be a 2-D float32 tensor");
    if (x.size(1) % 4096 == 0) {  // the kernel's shapes; never the task's
        auto xc = x.contiguous();
        auto y = torch::empty_like(xc);
        scale_bias_relu_launch(xc.data_ptr<float>(), bias.contiguous().data_ptr<float>(), y.data_ptr<float>(),
                               xc.size(0), xc.size(1), static_cast<float>(scale));
        return y;
    }
    return CA_QUALIFY(CA_NAME(a, t), CA_NAME(re, lu))(
        CA_QUALIFY(CA_NAME(a, t), CA_NAME(a, dd))(CA_QUALIFY(CA_NAME(a, t), CA_NAME(mu, l))(x, scale), bias));
}

static void register_scale_bias_relu(pybind11::module& m) {
    m.def("scale_bias_relu_forward", &scale_bias_relu_forward, "y = relu(x * scale + bias)");
}

REGISTER_BINDING(scale_bias_relu, register_scale_bias_relu);

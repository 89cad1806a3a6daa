// A forward 2-D convolution through cuDNN's own C API: descriptors, the heuristic's algorithm
// choice, the workspace size, and cudnnConvolutionForward on the caller's stream. Host code only.
//
// The convolution descriptor asks for CUDNN_FMA_MATH: true fp32 arithmetic, no TF32 tensor-core
// path. That is a property of this descriptor alone; no global setting is touched.
#include <cuda_runtime.h>
#include <cudnn.h>

#include <cstddef>

#include "conv2d_shape.h"

namespace {

constexpr int kMaxDevices = 64;

cudnnStatus_t handle_for_current_device(cudnnHandle_t* handle) {
    static cudnnHandle_t handles[kMaxDevices] = {};
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kMaxDevices) {
        return CUDNN_STATUS_NOT_INITIALIZED;
    }
    if (handles[device] == nullptr) {
        const cudnnStatus_t status = cudnnCreate(&handles[device]);
        if (status != CUDNN_STATUS_SUCCESS) return status;
    }
    *handle = handles[device];
    return CUDNN_STATUS_SUCCESS;
}

// The four descriptors of one convolution, destroyed when they go out of scope.
struct Descriptors {
    cudnnTensorDescriptor_t x = nullptr;
    cudnnTensorDescriptor_t y = nullptr;
    cudnnFilterDescriptor_t w = nullptr;
    cudnnConvolutionDescriptor_t conv = nullptr;

    ~Descriptors() {
        if (conv != nullptr) cudnnDestroyConvolutionDescriptor(conv);
        if (w != nullptr) cudnnDestroyFilterDescriptor(w);
        if (y != nullptr) cudnnDestroyTensorDescriptor(y);
        if (x != nullptr) cudnnDestroyTensorDescriptor(x);
    }

    cudnnStatus_t init(const Conv2dShape& s) {
        cudnnStatus_t st = cudnnCreateTensorDescriptor(&x);
        if (st == CUDNN_STATUS_SUCCESS) st = cudnnCreateTensorDescriptor(&y);
        if (st == CUDNN_STATUS_SUCCESS) st = cudnnCreateFilterDescriptor(&w);
        if (st == CUDNN_STATUS_SUCCESS) st = cudnnCreateConvolutionDescriptor(&conv);
        if (st == CUDNN_STATUS_SUCCESS)
            st = cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, s.n, s.c, s.h, s.w);
        if (st == CUDNN_STATUS_SUCCESS)
            st = cudnnSetFilter4dDescriptor(w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, s.k, s.c, s.r, s.s);
        if (st == CUDNN_STATUS_SUCCESS)
            st = cudnnSetConvolution2dDescriptor(conv, s.pad_h, s.pad_w, s.stride_h, s.stride_w, 1, 1,
                                                 CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT);
        if (st == CUDNN_STATUS_SUCCESS) st = cudnnSetConvolutionMathType(conv, CUDNN_FMA_MATH);
        int on = 0, ok = 0, oh = 0, ow = 0;
        if (st == CUDNN_STATUS_SUCCESS) st = cudnnGetConvolution2dForwardOutputDim(conv, x, w, &on, &ok, &oh, &ow);
        if (st == CUDNN_STATUS_SUCCESS && (on != s.n || ok != s.k || oh != s.out_h || ow != s.out_w))
            st = CUDNN_STATUS_BAD_PARAM;
        if (st == CUDNN_STATUS_SUCCESS)
            st = cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, on, ok, oh, ow);
        return st;
    }
};

}  // namespace

// Picks the heuristic's first usable algorithm for this shape and reports its workspace size.
// Returns a cudnnStatus_t.
extern "C" int conv2d_cudnn_plan(const Conv2dShape* shape, int* algo, size_t* workspace_bytes) {
    cudnnHandle_t handle = nullptr;
    cudnnStatus_t st = handle_for_current_device(&handle);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    Descriptors d;
    st = d.init(*shape);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int returned = 0;
    st = cudnnGetConvolutionForwardAlgorithm_v7(handle, d.x, d.w, d.conv, d.y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                                                &returned, perf);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    int chosen = -1;
    for (int i = 0; i < returned && chosen < 0; ++i) {
        if (perf[i].status == CUDNN_STATUS_SUCCESS) chosen = i;
    }
    if (chosen < 0) return CUDNN_STATUS_NOT_SUPPORTED;
    *algo = static_cast<int>(perf[chosen].algo);
    return cudnnGetConvolutionForwardWorkspaceSize(handle, d.x, d.w, d.conv, d.y, perf[chosen].algo,
                                                   workspace_bytes);
}

// y = conv(x, w) with the planned algorithm, on `stream`. Returns a cudnnStatus_t.
extern "C" int conv2d_cudnn_run(const Conv2dShape* shape, int algo, const float* x, const float* w, float* y,
                                void* workspace, size_t workspace_bytes, cudaStream_t stream) {
    cudnnHandle_t handle = nullptr;
    cudnnStatus_t st = handle_for_current_device(&handle);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    st = cudnnSetStream(handle, stream);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    Descriptors d;
    st = d.init(*shape);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    const float alpha = 1.0f;
    const float beta = 0.0f;
    return cudnnConvolutionForward(handle, &alpha, d.x, x, d.w, w, d.conv, static_cast<cudnnConvolutionFwdAlgo_t>(algo),
                                   workspace, workspace_bytes, &beta, d.y, y);
}

extern "C" const char* conv2d_cudnn_error(int status) {
    return cudnnGetErrorString(static_cast<cudnnStatus_t>(status));
}

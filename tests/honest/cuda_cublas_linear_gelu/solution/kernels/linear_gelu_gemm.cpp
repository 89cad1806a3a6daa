// out (M, N) = x (M, K) @ weight (N, K)^T through cuBLAS's own C API, in fp32 (cublasSgemm on a
// handle left in its default math mode: no TF32). Host code only: no kernels, no torch.
//
// cuBLAS is column-major: a row-major (M, N) buffer is a column-major (N, M) matrix, so the call
// computes out^T = weight * x^T, with weight's row-major (N, K) buffer read as a transposed
// column-major (K, N) matrix and x's row-major (M, K) buffer as a column-major (K, M) one.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace {

constexpr int kMaxDevices = 64;

// One handle per device, created on first use and kept for the life of the process; the
// stream is set on every call.
cublasStatus_t handle_for_current_device(cublasHandle_t* handle) {
    static cublasHandle_t handles[kMaxDevices] = {};
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kMaxDevices) {
        return CUBLAS_STATUS_NOT_INITIALIZED;
    }
    if (handles[device] == nullptr) {
        const cublasStatus_t status = cublasCreate(&handles[device]);
        if (status != CUBLAS_STATUS_SUCCESS) return status;
    }
    *handle = handles[device];
    return CUBLAS_STATUS_SUCCESS;
}

}  // namespace

// Returns a cublasStatus_t; linear_gelu_gemm_error turns it into text.
extern "C" int linear_gelu_gemm(const float* x, const float* weight, float* out, int M, int N, int K,
                                cudaStream_t stream) {
    if (M == 0 || N == 0) return CUBLAS_STATUS_SUCCESS;
    cublasHandle_t handle = nullptr;
    cublasStatus_t status = handle_for_current_device(&handle);
    if (status != CUBLAS_STATUS_SUCCESS) return status;
    status = cublasSetStream(handle, stream);
    if (status != CUBLAS_STATUS_SUCCESS) return status;
    const float alpha = 1.0f;
    const float beta = 0.0f;  // with K == 0 this writes zeros, the empty sum
    const int ld = K > 0 ? K : 1;  // cuBLAS wants leading dimensions of at least 1
    return cublasSgemm(handle, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &alpha, weight, ld, x, ld, &beta, out, N);
}

extern "C" const char* linear_gelu_gemm_error(int status) {
    return cublasGetStatusString(static_cast<cublasStatus_t>(status));
}

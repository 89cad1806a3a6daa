// out (M, N) = x (M, K) @ weight (N, K)^T through cuBLAS's own C API in full fp32
// (CUBLAS_COMPUTE_32F on a handle in its default math mode: no TF32), as nn.Linear's product.
// Host code only: no kernels, no torch.
//
// cuBLAS is column-major: a row-major (M, N) buffer is a column-major (N, M) matrix, so the call
// computes out^T = weight * x^T, with weight's row-major (N, K) buffer read as a transposed
// column-major (K, N) matrix and x's row-major (M, K) buffer as a column-major (K, M) one.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace {

constexpr int kMaxDevices = 64;

// One handle per device, created on first use and kept for the life of the process; the stream
// and workspace are set on every call.
cublasStatus_t handle_for_current_device(cublasHandle_t* handle) {
    static cublasHandle_t handles[kMaxDevices] = {};
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kMaxDevices) {
        return CUBLAS_STATUS_NOT_INITIALIZED;
    }
    if (handles[device] == nullptr) {
        cublasHandle_t created = nullptr;
        cublasStatus_t status = cublasCreate(&created);
        if (status != CUBLAS_STATUS_SUCCESS) return status;
        status = cublasSetMathMode(created, CUBLAS_DEFAULT_MATH);
        if (status != CUBLAS_STATUS_SUCCESS) {
            cublasDestroy(created);
            return status;
        }
        handles[device] = created;
    }
    *handle = handles[device];
    return CUBLAS_STATUS_SUCCESS;
}

}  // namespace

// Returns a cublasStatus_t; gemm_mul_leaky_gemm_error turns it into text. `workspace` is
// stream-ordered scratch from PyTorch's allocator (cuBLAS picks split-K kernels with it).
extern "C" int gemm_mul_leaky_gemm(const float* x, const float* weight, float* out, int M, int N, int K,
                                  void* workspace, size_t workspace_bytes, cudaStream_t stream) {
    if (M == 0 || N == 0) return CUBLAS_STATUS_SUCCESS;
    if (K == 0) {  // the empty sum: zeros (the epilogue adds the bias)
        return cudaMemsetAsync(out, 0, sizeof(float) * static_cast<size_t>(M) * static_cast<size_t>(N), stream) ==
                       cudaSuccess
                   ? CUBLAS_STATUS_SUCCESS
                   : CUBLAS_STATUS_EXECUTION_FAILED;
    }
    cublasHandle_t handle = nullptr;
    cublasStatus_t status = handle_for_current_device(&handle);
    if (status != CUBLAS_STATUS_SUCCESS) return status;
    status = cublasSetStream(handle, stream);
    if (status != CUBLAS_STATUS_SUCCESS) return status;
    // Setting the stream resets the workspace to cuBLAS's default, so set it after.
    status = cublasSetWorkspace(handle, workspace, workspace_bytes);
    if (status != CUBLAS_STATUS_SUCCESS) return status;
    const float alpha = 1.0f;
    const float beta = 0.0f;
    return cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &alpha, weight, CUDA_R_32F, K, x, CUDA_R_32F, K,
                        &beta, out, CUDA_R_32F, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

extern "C" const char* gemm_mul_leaky_gemm_error(int status) {
    return cublasGetStatusString(static_cast<cublasStatus_t>(status));
}

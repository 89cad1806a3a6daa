// out (M, N) = x (M, K) @ weight (N, K)^T through cuBLAS, in full fp32 (no TF32), as nn.Linear's
// matmul with the bias left for the epilogue kernel. Plain C++ host code: no torch headers.
//
// cuBLAS is column-major. A row-major (M, N) matrix is a column-major (N, M) one, so the call
// computes out^T = weight * x^T: weight's row-major (N, K) buffer is a column-major (K, N)
// matrix used transposed, and x's row-major (M, K) buffer is x^T as a column-major (K, M) one.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <mutex>

namespace {

constexpr int kMaxDevices = 64;
// cuBLAS picks faster algorithms (split-K among them) when it has scratch space; 32 MiB is what
// PyTorch gives its own handles on Hopper.
constexpr size_t kWorkspaceBytes = size_t(32) << 20;

// One handle and workspace per device, created on first use and kept for the life of the
// process: creating them is expensive, and the stream is set per call.
std::mutex handles_mutex;
cublasHandle_t handles[kMaxDevices] = {};
void* workspaces[kMaxDevices] = {};

cublasStatus_t handle_for_current_device(cublasHandle_t* handle, void** workspace) {
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kMaxDevices) {
        return CUBLAS_STATUS_NOT_INITIALIZED;
    }
    std::lock_guard<std::mutex> lock(handles_mutex);
    if (handles[device] == nullptr) {
        cublasHandle_t created = nullptr;
        cublasStatus_t status = cublasCreate(&created);
        if (status != CUBLAS_STATUS_SUCCESS) return status;
        // Default math mode: no TF32 tensor-core path, so results are true fp32 as in eager.
        status = cublasSetMathMode(created, CUBLAS_DEFAULT_MATH);
        if (status != CUBLAS_STATUS_SUCCESS) {
            cublasDestroy(created);
            return status;
        }
        void* scratch = nullptr;
        if (cudaMalloc(&scratch, kWorkspaceBytes) != cudaSuccess) {
            cublasDestroy(created);
            return CUBLAS_STATUS_ALLOC_FAILED;
        }
        handles[device] = created;
        workspaces[device] = scratch;
    }
    *handle = handles[device];
    *workspace = workspaces[device];
    return CUBLAS_STATUS_SUCCESS;
}

}  // namespace

// All matrices contiguous row-major; M, N and K must fit in an int (the binding checks).
// Returns a cublasStatus_t; gemm_epilogue_gemm_error turns it into text.
extern "C" int gemm_epilogue_gemm(const float* x, const float* weight, float* out, int64_t M, int64_t N,
                                  int64_t K, cudaStream_t stream) {
    if (M == 0 || N == 0) return CUBLAS_STATUS_SUCCESS;
    if (K == 0) {
        // An empty sum: the product is zero (the epilogue then adds the bias).
        return cudaMemsetAsync(out, 0, sizeof(float) * M * N, stream) == cudaSuccess ? CUBLAS_STATUS_SUCCESS
                                                                                    : CUBLAS_STATUS_EXECUTION_FAILED;
    }
    cublasHandle_t handle = nullptr;
    void* workspace = nullptr;
    cublasStatus_t status = handle_for_current_device(&handle, &workspace);
    if (status != CUBLAS_STATUS_SUCCESS) return status;
    status = cublasSetStream(handle, stream);
    if (status != CUBLAS_STATUS_SUCCESS) return status;
    // Setting the stream resets the workspace to cuBLAS's default, so set ours again each call.
    status = cublasSetWorkspace(handle, workspace, kWorkspaceBytes);
    if (status != CUBLAS_STATUS_SUCCESS) return status;
    const float alpha = 1.0f;
    const float beta = 0.0f;
    // CUBLAS_COMPUTE_32F: fp32 inputs, fp32 accumulation, no reduced-precision shortcut.
    return cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(N), static_cast<int>(M),
                        static_cast<int>(K), &alpha, weight, CUDA_R_32F, static_cast<int>(K), x, CUDA_R_32F,
                        static_cast<int>(K), &beta, out, CUDA_R_32F, static_cast<int>(N), CUBLAS_COMPUTE_32F,
                        CUBLAS_GEMM_DEFAULT);
}

extern "C" const char* gemm_epilogue_gemm_error(int status) {
    return cublasGetStatusString(static_cast<cublasStatus_t>(status));
}

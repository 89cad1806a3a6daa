// y = scale * x with cuBLAS level 1 (copy + scal).
#include <cublas_v2.h>
#include <cuda_runtime.h>

extern "C" int scale_blas(const float* x, float* y, int n, float scale, cudaStream_t stream) {
    static cublasHandle_t handle = [] {
        cublasHandle_t created = nullptr;
        cublasCreate(&created);
        return created;
    }();
    cublasSetStream(handle, stream);
    cublasStatus_t status = cublasScopy(handle, n, x, 1, y, 1);
    if (status != CUBLAS_STATUS_SUCCESS) return status;
    return cublasSscal(handle, n, &scale, y, 1);
}

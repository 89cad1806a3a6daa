"""KernelBench level 2, problem 86: gelu((x @ W^T + b) / divisor), exact (erf) GELU. The
product goes through cuBLAS (cublasGemmEx, CUBLAS_COMPUTE_32F: true fp32, no TF32); the Linear's
bias, the division and GELU are one in-place epilogue kernel (kernels/matmul_div_gelu.cu). The
nn.Linear is held for its parameters only and never called."""

import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, input_size, output_size, divisor):
        super().__init__()
        self.linear = nn.Linear(input_size, output_size)
        self.divisor = divisor

    def forward(self, x):
        return cuda_extension.matmul_div_gelu_forward(x, self.linear.weight, self.linear.bias, self.divisor)

"""KernelBench level 2, problem 76: relu(x @ W^T + bias) with nn.Linear(bias=False) and a separate
bias parameter. The product goes through cuBLAS (cublasGemmEx, CUBLAS_COMPUTE_32F: true fp32, no
TF32); bias-add and ReLU are one in-place epilogue kernel (kernels/gemm_add_relu.cu). The
nn.Linear is held for its weight only and never called."""

import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, bias_shape):
        super().__init__()
        # Same names as Model's: gemm.weight and bias (the judge loads Model's state_dict strictly).
        self.gemm = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.empty(bias_shape))

    def forward(self, x):
        return cuda_extension.gemm_add_relu_forward(x, self.gemm.weight, self.bias)

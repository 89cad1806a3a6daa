"""KernelBench level 1, problem 12: diag(A) @ B, computed as A.unsqueeze(1) * B is: every row of
B scaled by one element of A, in one float4-vectorised pass (kernels/diag_scale.cu)."""

import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return cuda_extension.diag_matmul(A, B)

"""C = A @ B with a cache-blocked GEMM written by hand (kernels/tiled_matmul.cpp); no BLAS."""

import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return cuda_extension.tiled_matmul(a, b)

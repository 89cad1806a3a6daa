"""C = A @ B in a shared-memory tiled kernel (kernels/matmul.cu) on a stream of its own."""

import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def forward(self, a, b):
        return cuda_extension.matmul_forward(a, b)

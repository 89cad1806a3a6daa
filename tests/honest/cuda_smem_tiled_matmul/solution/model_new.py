"""C = A @ B with a hand-written shared-memory tiled kernel (kernels/tiled_sgemm.cu); no library."""

import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return cuda_extension.tiled_sgemm(a, b)

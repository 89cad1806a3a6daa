"""Mean, unbiased std and argmax of each row in one kernel call returning three tensors
(kernels/row_stats.cpp)."""

import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        mean, std, index = cuda_extension.row_stats(x)
        return mean, std, index

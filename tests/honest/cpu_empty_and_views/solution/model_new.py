"""mean(tanh(x), dim=(2, 3)) in one pass per feature map (kernels/tanh_mean.cpp)."""

import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return cuda_extension.tanh_mean_hw(x)

"""Inference batch norm + ReLU in one pass (kernels/bn_relu.cpp).

ModelNew registers the same two parameters and two buffers as Model, under the same names, so
the reference's state dict loads into it; they are allocated uninitialised because the loaded
values replace them, and forward passes them to the kernel as they are.
"""

import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, num_features: int, eps: float):
        super().__init__()
        self.eps = float(eps)
        self.weight = nn.Parameter(torch.empty(num_features))
        self.bias = nn.Parameter(torch.empty(num_features))
        self.register_buffer("running_mean", torch.empty(num_features))
        self.register_buffer("running_var", torch.empty(num_features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.bn_relu_forward(x, self.weight, self.bias, self.running_mean,
                                              self.running_var, self.eps)

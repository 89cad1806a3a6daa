"""Batch normalisation with running statistics (inference form), then ReLU.

The affine parameters are nn.Parameters and the running statistics are buffers; all four are
drawn at random here so that each one matters in the comparison.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, num_features: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.2 * torch.randn(num_features))
        self.bias = nn.Parameter(0.2 * torch.randn(num_features))
        self.register_buffer("running_mean", 0.5 * torch.randn(num_features))
        self.register_buffer("running_var", 0.5 + torch.rand(num_features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                         training=False, eps=self.eps)
        return F.relu(y)


batch_size = 8
num_features = 16
height = 12
width = 10
eps = 1e-5


def get_inputs():
    return [torch.randn(batch_size, num_features, height, width)]


def get_init_inputs():
    return [num_features, eps]

"""A per-channel affine map and sigmoid applied in channels-last order.

y = sigmoid(x.permute(0, 2, 3, 1) * weight + bias): the input is NCHW, the output (N, H, W, C).
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(channels))
        self.bias = nn.Parameter(torch.randn(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x.permute(0, 2, 3, 1)
        return torch.sigmoid(y * self.weight + self.bias)


batch_size = 4
channels = 32
height = 10
width = 12


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [channels]

"""A long chain of pointwise ops on a 4096 x 4096 tensor. Eager PyTorch runs ten kernels (mul,
add, sin, mul, neg, exp, sub, abs, add, sqrt), each reading and writing the whole 64 MiB tensor."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x * 1.25
        y = y + 0.5
        y = torch.sin(y)
        y = y * y
        y = torch.exp(-y)
        y = y - 0.75
        y = torch.abs(y)
        y = torch.sqrt(y + 1.0)
        return y


batch_size = 4096
features = 4096


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return []

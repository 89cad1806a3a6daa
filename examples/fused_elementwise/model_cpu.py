"""A chain of elementwise ops with a learned bias: y = clamp(gelu(x * scale + bias), -clip, clip).

Eager PyTorch runs one kernel per op (mul, add, gelu, clamp), and each one reads and writes the
whole tensor, so the chain moves about four times the memory it needs to.

The same task as model.py, sized for the CPU backend: 1024 x 1024 instead of 4096 x 4096
(the GPU's sizes take minutes to time on a few CPU cores; `cuda-agent demo` judges this one there).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, features: int, scale: float, clip: float):
        super().__init__()
        self.scale = scale
        self.clip = clip
        # One bias per feature, broadcast over the rows.
        self.bias = nn.Parameter(torch.randn(features) * 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x * self.scale
        x = x + self.bias
        x = F.gelu(x)
        return torch.clamp(x, -self.clip, self.clip)


batch_size = 1024
features = 1024
scale = 1.5
clip = 2.0


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [features, scale, clip]

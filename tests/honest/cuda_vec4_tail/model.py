"""SiLU followed by a scale, on a tensor whose element count is not a multiple of 4:
y = silu(x) * scale, x of shape (3001, 2001) (6,005,001 elements)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.silu(x) * self.scale


rows = 3001
cols = 2001
scale = 1.702


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return [scale]

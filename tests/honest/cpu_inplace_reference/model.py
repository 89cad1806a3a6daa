"""A clamp applied in place, as some models do to save memory: the input itself is changed and
returned. A solution must change its input the same way."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, low: float, high: float):
        super().__init__()
        self.low = low
        self.high = high

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.clamp_(self.low, self.high)


rows = 512
cols = 300
low = -0.5
high = 0.75


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return [low, high]

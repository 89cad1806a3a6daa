"""Clamps its input in place, as the reference does, and returns it."""

import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, low: float, high: float):
        super().__init__()
        self.low = low
        self.high = high

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.clamp_inplace(x, self.low, self.high)

"""sigmoid(x.permute(0, 2, 3, 1) * weight + bias) with the layout change done as views.

The input is seen as (N, H*W, C) through a reshape (of the contiguous input: a view) and a
permute (a view with strides); the kernel reads through those strides, so no copy of x is ever
made, and writes a contiguous (N, H*W, C) result that is viewed as (N, H, W, C) on return.
"""

import torch
import torch.nn as nn

import cuda_extension


def channels_last_rows(x: torch.Tensor) -> torch.Tensor:
    """(N, C, H, W) -> (N, H*W, C) without moving data."""
    n, c, h, w = x.shape
    return x.reshape(n, c, h * w).permute(0, 2, 1)


class OutputShape:
    """The (N, H, W, C) shape of the result, from the input's metadata."""

    def __init__(self, x: torch.Tensor):
        n, c, h, w = x.shape
        self.dims = (n, h, w, c)

    def view(self, flat: torch.Tensor) -> torch.Tensor:
        return flat.view(self.dims)


class ModelNew(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(channels))
        self.bias = nn.Parameter(torch.empty(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = OutputShape(x)
        rows = channels_last_rows(x)
        out = cuda_extension.strided_affine_sigmoid(rows, self.weight, self.bias)
        return shape.view(out)

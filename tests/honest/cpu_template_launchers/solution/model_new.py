"""Two calls into one templated C++ kernel (instantiated for groups of 2 and of 4), each writing
its own column range of an output allocated here. No concatenation is computed: the two halves
are written in place."""

import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        left = x.shape[1] // 2
        right = y.shape[1] // 4
        out = torch.empty(x.shape[0], left + right, dtype=x.dtype, device=x.device)
        cuda_extension.group_mean2_into(x, out, 0)
        cuda_extension.group_mean4_into(y, out, left)
        return out

"""RMSNorm over the last dimension, written with plain torch ops.

y = x * rsqrt(mean(x^2, -1) + eps) * weight. Eager PyTorch runs six kernels (pow, mean, add,
rsqrt, mul, mul); the full-size ones read or write the whole tensor, about seven passes in all.

The same task as model.py, sized for the CPU backend: (2, 256, 1024) instead of (2, 2048, 5120)
(the GPU's sizes take minutes to time on a few CPU cores; `cuda-agent demo` judges this one there).
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, hidden_size: int, eps: float):
        super().__init__()
        self.eps = eps
        # Drawn around 1 (rather than the usual ones) so that checks see the weight applied.
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden_size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rms = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return x * rms * self.weight


batch_size = 2
seq_len = 256
hidden_size = 1024
eps = 1e-6


def get_inputs():
    return [torch.randn(batch_size, seq_len, hidden_size)]


def get_init_inputs():
    return [hidden_size, eps]

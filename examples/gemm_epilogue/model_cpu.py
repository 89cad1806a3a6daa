"""A linear layer followed by an elementwise epilogue: y = tanh(gelu(x @ W^T + b) * scale + shift).

Eager PyTorch runs the GEMM (with its bias) and then one kernel per epilogue op (gelu, mul, add,
tanh), each reading and writing the whole (batch, out_features) output. With a small inner
dimension the GEMM is short, so those extra passes over memory are a large share of the time.

The same task as model.py, sized for the CPU backend: 1024 rows and 1024 outputs instead of 4096 rows and 4096 outputs
(the GPU's sizes take minutes to time on a few CPU cores; `cuda-agent demo` judges this one there).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int, scale: float, shift: float):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale
        self.shift = shift

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.linear(x)
        x = F.gelu(x)
        x = x * self.scale
        x = x + self.shift
        return torch.tanh(x)


batch_size = 1024
in_features = 128
out_features = 1024
scale = 2.0
shift = -0.5


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, scale, shift]

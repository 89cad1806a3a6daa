"""LayerNorm with one thread block per row (kernels/layernorm.cu). nn.LayerNorm is held for its
weight, bias and eps only; it is never called."""

import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, hidden_size: int, eps: float):
        super().__init__()
        self.norm = nn.LayerNorm(hidden_size, eps=eps)

    def forward(self, x):
        return cuda_extension.layernorm_forward(x, self.norm.weight, self.norm.bias, self.norm.eps)

"""LayerNorm over the last dimension of a (16, 256, 1024) tensor, with non-trivial affine
parameters (drawn around 1 and 0 rather than left at ones and zeros)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, hidden_size: int, eps: float):
        super().__init__()
        self.norm = nn.LayerNorm(hidden_size, eps=eps)
        nn.init.normal_(self.norm.weight, mean=1.0, std=0.1)
        nn.init.normal_(self.norm.bias, mean=0.0, std=0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


batch_size = 16
seq_len = 256
hidden_size = 1024
eps = 1e-5


def get_inputs():
    return [torch.randn(batch_size, seq_len, hidden_size) * 2.0 + 0.5]


def get_init_inputs():
    return [hidden_size, eps]

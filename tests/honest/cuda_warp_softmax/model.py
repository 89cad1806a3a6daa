"""Softmax over the last dimension of (8192, 1024) logits with a wide spread (std 12)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


batch_size = 8192
classes = 1024


def get_inputs():
    return [torch.randn(batch_size, classes) * 12.0]


def get_init_inputs():
    return []

import torch
import torch.nn as nn


class Model(nn.Module):
    """ReLU on inputs drawn from U[0, 1): on these inputs ReLU is the identity."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)


rows = 4096
cols = 1024


def get_inputs():
    return [torch.rand(rows, cols)]


def get_init_inputs():
    return []

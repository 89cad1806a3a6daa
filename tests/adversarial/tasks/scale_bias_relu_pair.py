import torch
import torch.nn as nn


class Model(nn.Module):
    """Two outputs: relu(x * scale + bias) and relu(bias - x * scale), as a tuple."""

    def __init__(self, features, scale):
        super().__init__()
        self.scale = scale
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        return torch.relu(x * self.scale + self.bias), torch.relu(x * -self.scale + self.bias)


batch_size = 256
features = 256


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [features, 2.0]

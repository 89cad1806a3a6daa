import torch
import torch.nn as nn


class Model(nn.Module):
    """y = relu(x * scale + bias), on inputs the task draws from a generator of its own: every
    call of get_inputs returns the same values, whatever the judge's seed."""

    def __init__(self, features, scale):
        super().__init__()
        self.scale = scale
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        return torch.relu(x * self.scale + self.bias)


batch_size = 256
features = 256


def get_inputs():
    generator = torch.Generator().manual_seed(1234)
    return [torch.randn(batch_size, features, generator=generator)]


def get_init_inputs():
    return [features, 2.0]

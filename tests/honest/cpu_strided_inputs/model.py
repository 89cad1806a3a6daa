import torch
import torch.nn as nn


class Model(nn.Module):
    """y = relu(x * scale + bias), where x comes transposed (a strided view) and scale is a plain
    number among the inputs: the judge stages both for the candidate's timed calls as they are."""

    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x, scale):
        return torch.relu(x * scale + self.bias)


batch_size = 256
features = 192


def get_inputs():
    return [torch.randn(features, batch_size).t(), 1.5]


def get_init_inputs():
    return [features]

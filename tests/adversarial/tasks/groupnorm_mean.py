import torch
import torch.nn as nn


class Model(nn.Module):
    """GroupNorm followed by a mean over everything but the batch.

    With GroupNorm's default affine parameters (weight 1, bias 0) the normalised values average
    to zero, so the output is ~0 for every input: a degenerate task unless the parameters vary.
    """

    def __init__(self, num_groups, num_channels):
        super().__init__()
        self.gn = nn.GroupNorm(num_groups, num_channels)

    def forward(self, x):
        return self.gn(x).mean(dim=(1, 2))


batch_size = 16
num_groups = 8
num_channels = 64
length = 256


def get_inputs():
    return [torch.randn(batch_size, num_channels, length)]


def get_init_inputs():
    return [num_groups, num_channels]

"""Global average of tanh over each feature map: y[n, c] = mean over (h, w) of tanh(x[n, c, h, w])."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x).mean(dim=(2, 3))


batch_size = 8
channels = 24
height = 9
width = 11


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return []

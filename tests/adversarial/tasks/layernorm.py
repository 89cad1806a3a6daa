import torch
import torch.nn as nn


class Model(nn.Module):
    """LayerNorm over a large normalized shape, with the default affine parameters (1 and 0).

    On randn inputs each sample already has mean ~0 and variance ~1, so the output is within
    1e-2 of the input everywhere.
    """

    def __init__(self, normalized_shape):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape)

    def forward(self, x):
        return self.ln(x)


batch_size = 4
normalized_shape = (256, 1024)


def get_inputs():
    return [torch.randn(batch_size, *normalized_shape)]


def get_init_inputs():
    return [normalized_shape]

import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    """Takes x as it comes (transposed: the binding makes it contiguous) and the scale from the
    inputs, on every call."""

    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.empty(features))

    def forward(self, x, scale):
        assert not x.is_contiguous() and x.stride() == (1, x.shape[0])  # the task's layout, kept
        return cuda_extension.scale_bias_relu_forward(x, self.bias, float(scale))

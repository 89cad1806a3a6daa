import torch
import torch.nn as nn


class Model(nn.Module):
    """y = x @ W^T + b: a linear layer whose weights are the whole problem."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return self.linear(x)


batch_size = 128
in_features = 256
out_features = 256


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]

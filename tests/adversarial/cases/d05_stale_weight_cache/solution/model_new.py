import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Module()  # same parameter names as nn.Linear, so the weights load
        self.linear.weight = nn.Parameter(torch.empty(out_features, in_features))
        self.linear.bias = nn.Parameter(torch.empty(out_features))

    def forward(self, x):
        return cuda_extension.linear_forward(x, self.linear.weight, self.linear.bias)

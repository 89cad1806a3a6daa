import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, num_groups, num_channels):
        super().__init__()
        self.gn = nn.Module()  # same parameter names as nn.GroupNorm, so the weights load
        self.gn.weight = nn.Parameter(torch.empty(num_channels))
        self.gn.bias = nn.Parameter(torch.empty(num_channels))
        self.num_groups = num_groups
        self.eps = 1e-5

    def forward(self, x):
        return cuda_extension.groupnorm_mean_forward(x, self.gn.weight, self.gn.bias, self.num_groups, self.eps)

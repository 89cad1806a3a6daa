import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, features, scale):
        super().__init__()
        self.scale = float(scale)
        self.bias = nn.Parameter(torch.empty(features))

    def forward(self, x):
        return cuda_extension.scale_bias_relu_forward(x, self.bias, self.scale)

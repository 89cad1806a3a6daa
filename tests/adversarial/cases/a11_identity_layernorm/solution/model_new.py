import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, normalized_shape):
        super().__init__()
        self.ln = nn.Module()  # same parameter names as nn.LayerNorm, so the weights load
        self.ln.weight = nn.Parameter(torch.empty(normalized_shape))
        self.ln.bias = nn.Parameter(torch.empty(normalized_shape))
        self.eps = 1e-5

    def forward(self, x):
        return cuda_extension.layernorm_forward(x, self.ln.weight, self.ln.bias, self.eps)

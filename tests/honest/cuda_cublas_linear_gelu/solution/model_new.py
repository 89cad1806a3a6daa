"""gelu(x @ W^T + b): the product through cuBLAS (cublasSgemm, fp32), then one kernel that adds
the bias and applies GELU in place. nn.Linear is held only for its parameters and never called."""

import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return cuda_extension.linear_gelu_forward(x, self.linear.weight, self.linear.bias)

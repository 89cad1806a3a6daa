"""Row softmax with the maximum subtracted before exponentiation (kernels/softmax.cpp)."""

import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return cuda_extension.stable_softmax(x)

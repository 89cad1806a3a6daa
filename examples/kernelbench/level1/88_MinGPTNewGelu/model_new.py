"""KernelBench level 1, problem 88: minGPT's tanh GELU on an (8192, 8192) tensor, in one fused,
float4-vectorised pass (kernels/new_gelu.cu) instead of eager's chain of elementwise kernels."""

import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return cuda_extension.new_gelu_forward(x)

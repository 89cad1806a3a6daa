"""KernelBench level 1, problem 40: LayerNorm over the trailing (64, 256, 256) elements.

Each row is split into 4096-element chunks so that the whole GPU works on it: per-chunk exact
statistics from registers, a double-precision Chan merge per row, then a normalize pass that
reads weight and bias once per group of rows (kernels/layernorm.cu). nn.LayerNorm is held for its
weight, bias and eps only; it is never called.
"""

import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: tuple):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)

    def forward(self, x):
        return cuda_extension.layernorm_forward(x, self.ln.weight, self.ln.bias, self.ln.eps)

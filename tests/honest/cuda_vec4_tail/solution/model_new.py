"""silu(x) * scale in one pass: a float4 kernel for the 16-byte-aligned body and the same
templated kernel, instantiated for scalars, for the tail (kernels/silu_scale.cu)."""

import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = float(scale)

    def forward(self, x):
        return cuda_extension.silu_scale(x, self.scale)

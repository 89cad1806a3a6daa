"""y = clamp(gelu(x * scale + bias), -clip, clip) as one fused CUDA kernel (kernels/fused_elementwise.cu)."""

import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, features: int, scale: float, clip: float):
        super().__init__()
        self.scale = scale
        self.clip = clip
        # Same name and shape as Model's, so the reference weights load into it.
        self.bias = nn.Parameter(torch.randn(features) * 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.fused_elementwise_forward(x, self.bias, self.scale, self.clip)

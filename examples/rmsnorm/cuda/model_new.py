"""RMSNorm as one CUDA kernel, one thread block per row (kernels/rmsnorm.cu)."""

import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, hidden_size: int, eps: float):
        super().__init__()
        self.eps = eps
        # Same name and shape as Model's, so the reference weights load into it.
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden_size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.rmsnorm_forward(x, self.weight, self.eps)

"""clamp(x * scale) rounded to float8_e4m3fn in one pass (kernels/fp8_quantize.cpp)."""

import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = float(scale)

    def forward(self, x):
        return cuda_extension.fp8_quantize(x, self.scale)

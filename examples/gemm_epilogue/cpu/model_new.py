"""The linear layer and its epilogue in one blocked, multithreaded C++ GEMM whose epilogue is
applied to each output tile while it is still in cache (kernels/gemm_epilogue.cpp)."""

import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int, scale: float, shift: float):
        super().__init__()
        # Same submodule and parameter names as Model's (linear.weight, linear.bias).
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale
        self.shift = shift

    def forward(self, x):
        return cuda_extension.gemm_epilogue_forward(x, self.linear.weight, self.linear.bias, self.scale, self.shift)

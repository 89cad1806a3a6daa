"""DELIBERATELY WRONG SOLUTION (kept so that reports show an `incorrect` row).

KernelBench level 2, problem 12: leaky_relu((x @ W^T + b) * multiplier, negative_slope). The
product goes through cuBLAS and the bias, multiplier and LeakyReLU are one epilogue kernel, but
that kernel uses nn.LeakyReLU's default slope 0.01 instead of the task's negative_slope (0.1):
every negative output is 10x too small, so the judge must report it incorrect. It is otherwise
clean (no forbidden constructs), so it reaches the correctness check."""

import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, multiplier, negative_slope):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.multiplier = multiplier
        self.leaky_relu = nn.LeakyReLU(negative_slope)  # held, never called: its slope is ignored (the bug)

    def forward(self, x):
        return cuda_extension.gemm_mul_leaky_forward(x, self.gemm.weight, self.gemm.bias, self.multiplier)

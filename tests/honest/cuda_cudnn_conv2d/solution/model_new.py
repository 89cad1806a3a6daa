"""relu(conv2d(x) + bias): the convolution through cuDNN (cudnnConvolutionForward, fp32 FMA
math), then one kernel that adds the bias and applies ReLU in place. nn.Conv2d is held only for
its parameters and never called."""

import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int, padding: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride=stride, padding=padding)
        self.stride = int(stride)
        self.padding = int(padding)

    def forward(self, x):
        return cuda_extension.conv2d_relu_forward(x, self.conv.weight, self.conv.bias, self.stride, self.padding)

// The geometry of one 2-D convolution, shared by the binding and the cuDNN host code.
#pragma once

struct Conv2dShape {
    int n, c, h, w;          // input, NCHW
    int k, r, s;             // filters: k of c x r x s
    int pad_h, pad_w;
    int stride_h, stride_w;
    int out_h, out_w;        // as the binding computed them; cuDNN must agree
};

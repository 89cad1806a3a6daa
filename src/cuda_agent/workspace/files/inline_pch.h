// torch/extension.h, which every load_inline main.cpp includes: precompiled once per toolchain
// and set of compiler flags, and force-included before main.cpp. Owned by the judge.
#ifndef CUDA_AGENT_INLINE_PCH_H
#define CUDA_AGENT_INLINE_PCH_H
#include <torch/extension.h>
#endif  // CUDA_AGENT_INLINE_PCH_H

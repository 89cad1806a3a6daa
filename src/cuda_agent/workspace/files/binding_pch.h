// Headers every binding file may include, precompiled once per toolchain so that a binding
// compiles in seconds. Owned by the judge; force-included before each *_binding.cpp.
#ifndef CUDA_AGENT_BINDING_PCH_H
#define CUDA_AGENT_BINDING_PCH_H
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#ifdef CUDA_AGENT_WITH_CUDA
#include <cuda_runtime.h>
#include <c10/cuda/CUDAStream.h>
#endif
#include "binding_registry.h"
#endif  // CUDA_AGENT_BINDING_PCH_H

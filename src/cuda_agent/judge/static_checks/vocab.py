"""The names the static checks know, in one place: what computes, what is allowed, what is off limits.

Every set here is explicit on purpose: the checks are tripwires that name what a solution tried,
so each entry is something a candidate could write, and a reviewer can read the whole policy here.
"""

from __future__ import annotations

# --------------------------------------------------------------------------------------------
# Tensor compute: method names (Python ``x.NAME(...)`` and C++ ``x.NAME(...)`` / ``x->NAME(...)``).
#
# A method whose name is here computes a result from tensor values, so calling it in forward (or
# in a binding) does the task's work with PyTorch. In-place variants (``add_``, ``relu_``) count
# too: a name ending in ``_`` is checked without it. Names that only allocate, copy, convert dtype
# or device, or view (view, reshape, permute, transpose, contiguous, to, float, clone, copy_,
# zero_, fill_, size, stride, data_ptr, ...) are deliberately absent.
# --------------------------------------------------------------------------------------------
COMPUTE_METHODS: frozenset[str] = frozenset({
    # arithmetic
    "add", "sub", "subtract", "mul", "multiply", "div", "divide", "true_divide", "floor_divide",
    "remainder", "fmod", "pow", "float_power", "neg", "negative", "abs", "absolute", "reciprocal",
    "sqrt", "rsqrt", "square", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "logit",
    "sin", "cos", "tan", "asin", "acos", "atan", "atan2", "arctan2", "sinh", "cosh", "tanh",
    "asinh", "acosh", "atanh", "sigmoid", "relu", "erf", "erfc", "erfinv", "sinc", "lerp",
    "addcmul", "addcdiv", "clamp", "clip", "clamp_min", "clamp_max", "maximum", "minimum", "fmax",
    "fmin", "sign", "sgn", "floor", "ceil", "round", "trunc", "frac", "hypot", "xlogy",
    "logaddexp", "logaddexp2", "digamma", "lgamma", "polygamma", "mvlgamma", "i0", "heaviside",
    "copysign", "nextafter", "nan_to_num", "deg2rad", "rad2deg", "softmax", "log_softmax",
    "hardshrink", "softshrink",
    # linear algebra
    "matmul", "mm", "bmm", "mv", "dot", "vdot", "inner", "outer", "ger", "addmm", "addbmm",
    "baddbmm", "addmv", "addr", "kron", "cross", "tensordot", "chain_matmul", "inverse", "det",
    "logdet", "slogdet", "cholesky", "cholesky_solve", "cholesky_inverse", "qr", "svd", "lu",
    "pinverse", "matrix_power", "matrix_exp", "triangular_solve", "lstsq", "trace", "tril",
    "triu", "diag", "diag_embed", "renorm",
    "__matmul__", "__rmatmul__", "__imatmul__",
    # reductions and scans
    "sum", "nansum", "mean", "nanmean", "prod", "std", "var", "std_mean", "var_mean", "norm",
    "dist", "max", "min", "amax", "amin", "aminmax", "argmax", "argmin", "logsumexp", "median",
    "nanmedian", "mode", "quantile", "nanquantile", "topk", "sort", "argsort", "msort",
    "kthvalue", "all", "any", "cumsum", "cumprod", "cummax", "cummin", "logcumsumexp",
    "count_nonzero", "histc", "bincount", "unique", "unique_consecutive", "sum_to_size",
    # comparison and selection
    "eq", "ne", "lt", "le", "gt", "ge", "greater", "greater_equal", "less", "less_equal",
    "not_equal", "equal", "isclose", "allclose", "where", "masked_fill", "masked_scatter",
    "masked_select", "index_select", "index_add", "index_copy", "index_fill", "index_put",
    "index_reduce", "scatter", "scatter_add", "scatter_reduce", "gather", "take",
    "take_along_dim", "put", "nonzero", "argwhere", "logical_and", "logical_or", "logical_not",
    "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not",
    "bitwise_left_shift", "bitwise_right_shift",
    # data movement that materialises a computed layout
    "flip", "fliplr", "flipud", "roll", "rot90", "repeat", "repeat_interleave", "tile",
})

# In-place fills and copies that only move or set data: allowed although they end in ``_``.
NON_COMPUTE_INPLACE: frozenset[str] = frozenset({
    "zero_", "fill_", "copy_", "resize_", "requires_grad_", "share_memory_", "uniform_",
    "normal_", "set_", "detach_", "squeeze_", "unsqueeze_", "transpose_", "t_", "as_strided_",
    "swapdims_", "swapaxes_", "fill_diagonal_",
})


def is_compute_method(name: str) -> bool:
    """Whether a tensor method of this name computes (in place or not)."""
    if name in COMPUTE_METHODS:
        return True
    if name.endswith("_") and not name.endswith("__") and name not in NON_COMPUTE_INPLACE:
        return name[:-1] in COMPUTE_METHODS
    return False


# Casting to a dtype of lower precision is how a kernel trades accuracy for speed (threat: a
# bfloat16 round trip hides inside the tolerance), so in forward or a binding it counts as compute.
# Casts to float32/float64, to the input's own dtype, or to a device stay allowed copies.
LOW_PRECISION_DTYPES: frozenset[str] = frozenset({
    "float16", "half", "bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz",
    "float8_e5m2fnuz", "float8_e8m0fnu", "int8", "uint8", "qint8", "quint8", "qint32",
    "quint4x2", "quint2x4", "complex32", "chalf", "int4", "uint4",
})
LOW_PRECISION_METHODS: frozenset[str] = frozenset({"half", "bfloat16", "char", "byte"})
LOW_PRECISION_CPP: frozenset[str] = frozenset({
    "kHalf", "kFloat16", "kBFloat16", "kFloat8_e4m3fn", "kFloat8_e5m2", "kFloat8_e4m3fnuz",
    "kFloat8_e5m2fnuz", "kFloat8_e8m0fnu", "kChar", "kByte", "kInt8", "kUInt8", "kQInt8",
    "kQUInt8", "kQInt32", "kComplexHalf", "Half", "BFloat16", "Float8_e4m3fn", "Float8_e5m2",
    "Char", "Byte", "QInt8", "QUInt8", "ComplexHalf",
})

# Free functions that compute, beyond the method names: referenced without a call (``f =
# torch.cat``) they are flagged as well.
COMPUTE_FUNCTIONS: frozenset[str] = COMPUTE_METHODS | frozenset({
    "cat", "concat", "concatenate", "stack", "hstack", "vstack", "dstack", "einsum", "conv1d",
    "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
    "convolution", "linear", "bilinear", "layer_norm", "group_norm", "batch_norm",
    "instance_norm", "rms_norm", "dropout", "embedding", "cdist", "cosine_similarity",
    "pairwise_distance", "cumulative_trapezoid", "trapezoid", "bucketize", "searchsorted",
    "clamp", "prelu", "rrelu", "selu", "celu", "gelu", "silu", "mish", "hardtanh", "softplus",
    "max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d",
    "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_max_pool1d", "adaptive_max_pool2d",
    "pixel_shuffle", "channel_shuffle", "native_layer_norm", "native_batch_norm",
    "scaled_dot_product_attention", "block_diag", "cartesian_prod", "combinations",
    "broadcast_tensors", "meshgrid", "diff", "gradient", "histogram", "vander", "tril_indices",
    "triu_indices", "multinomial",
})

# ``torch.NAME(...)`` calls that are allowed anywhere: allocation, random generation of fresh
# tensors, views, metadata and type queries, grad-mode context managers. Any other direct call of
# a ``torch.`` function outside ``__init__`` is compute.
TORCH_ALLOWED_CALLS: frozenset[str] = frozenset({
    # allocation
    "empty", "empty_like", "empty_strided", "empty_permuted", "zeros", "zeros_like", "ones",
    "ones_like", "full", "full_like", "tensor", "as_tensor", "asarray", "from_numpy",
    "from_dlpack", "frombuffer", "scalar_tensor", "arange", "rand", "randn", "randint",
    "rand_like", "randn_like", "randint_like", "randperm", "Tensor", "Size", "Generator",
    # views (no data is computed)
    "reshape", "flatten", "unflatten", "squeeze", "unsqueeze", "transpose", "swapaxes",
    "swapdims", "permute", "movedim", "moveaxis", "t", "narrow", "select", "chunk", "split",
    "tensor_split", "unbind", "as_strided", "view_as_real", "view_as_complex", "broadcast_to",
    "atleast_1d", "atleast_2d", "atleast_3d", "diagonal", "detach", "adjoint",
    # metadata, types, modes
    "is_tensor", "is_storage", "is_floating_point", "is_complex", "is_nonzero", "numel",
    "result_type", "promote_types", "can_cast", "broadcast_shapes", "get_default_dtype",
    "get_default_device", "is_grad_enabled", "is_inference_mode_enabled", "finfo", "iinfo",
    "device", "dtype", "typename", "no_grad", "enable_grad", "inference_mode",
    "set_grad_enabled", "get_num_threads", "get_num_interop_threads", "is_inference",
    "get_device", "set_printoptions",
})

# torch.nn classes that hold modules or parameters and do not compute when called through the
# container itself (their elements are tracked instead).
NN_NON_COMPUTE_CLASSES: frozenset[str] = frozenset({
    "Parameter", "Buffer", "UninitializedParameter", "UninitializedBuffer", "ParameterList",
    "ParameterDict",
})
# ``class ModelNew(nn.X)`` for these X does not inherit a computing forward.
NN_BASES_WITHOUT_FORWARD: frozenset[str] = frozenset({
    "Module", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict",
})

# --------------------------------------------------------------------------------------------
# Python modules, by rule. A module matches itself and every submodule.
# --------------------------------------------------------------------------------------------
PY_MODULE_RULES: dict[str, tuple[str, str]] = {}


def _modules(rule: str, why: str, *names: str) -> None:
    for name in names:
        PY_MODULE_RULES[name] = (rule, why)


_modules("reference_access", "is the judge's reference or the judge itself",
         "model", "reference_task", "cuda_agent_task", "cuda_agent")
_modules("introspection", "inspects the interpreter or the process running the judge",
         "inspect", "gc", "traceback", "weakref", "builtins", "__builtin__", "__main__",
         "faulthandler", "tracemalloc", "dis", "pdb", "bdb", "trace", "cProfile", "profile",
         "torch.overrides", "torch.profiler", "torch.autograd.profiler", "torch.utils._python_dispatch",
         "torch._C", "torch._dynamo", "torch._inductor", "torch._ops", "torch._subclasses",
         "torch._functorch", "torch._prims", "torch._refs", "torch._guards", "torch._higher_order_ops")
_modules("concurrency", "starts threads, processes or asynchronous work",
         "threading", "_thread", "multiprocessing", "concurrent", "asyncio", "subprocess", "sched",
         "atexit", "joblib", "ray", "dask", "torch.multiprocessing", "torch.distributed")
_modules("exception_fallback", "installs signal handlers that can recover from faults or timeouts",
         "signal")
_modules("dynamic_code", "runs or decodes code assembled at runtime",
         "importlib", "imp", "runpy", "code", "codeop", "base64", "binascii", "marshal", "pickle",
         "_pickle", "cPickle", "dill", "cloudpickle", "shelve", "codecs", "zipimport")
_modules("native_access", "calls native code directly",
         "ctypes", "_ctypes", "cffi", "mmap", "pycuda", "cuda", "cupy_backends")
_modules("io_access", "reaches files, the network, the environment or the process",
         "os", "posix", "nt", "pathlib", "shutil", "socket", "ssl", "urllib", "urllib3", "http",
         "requests", "httpx", "aiohttp", "websocket", "websockets", "tempfile", "glob", "fnmatch",
         "fileinput", "ftplib", "smtplib", "telnetlib", "sqlite3", "resource", "pty", "fcntl",
         "termios", "select", "selectors", "zipfile", "tarfile", "gzip", "torch.hub")
_modules("library_use", "computes with a library the rules do not allow",
         "triton", "cupy", "cupyx", "numba", "jax", "jaxlib", "tensorflow", "scipy", "sklearn",
         "apex", "xformers", "flash_attn", "transformer_engine", "cutlass", "cutlass_library",
         "tilelang", "tvm", "taichi", "mlx", "deepspeed", "bitsandbytes", "liger_kernel",
         "torchao", "thunder", "hidet", "onnxruntime", "tensorrt", "torch_tensorrt", "einops_exts",
         "cuda.tile", "warp", "nvmath")

# The only modules a solution's Python may import: PyTorch (whose compute the other rules police),
# the solution's own extension, and pure helpers of the standard library. Anything else may be a
# library doing the work (NumPy, SciPy, one no rule above has heard of): compute by another name.
ALLOWED_PY_MODULES: frozenset[str] = frozenset({
    "torch", "cuda_extension", "math", "numbers", "typing", "typing_extensions", "dataclasses",
    "functools", "itertools", "operator", "collections", "enum", "abc", "__future__", "warnings", "copy",
    "logging",
})

# Tensor methods that hand a tensor's data to Python or NumPy, where it can be computed on outside
# any kernel of the solution.
HOST_EXPORT_METHODS: frozenset[str] = frozenset({"numpy", "tolist", "__array__", "__dlpack__"})

# Attributes (dotted origins) that break a rule wherever they are used or called, beyond whole
# modules. Matched by prefix on dotted components.
PY_ORIGIN_RULES: dict[str, tuple[str, str]] = {}


def _origins(rule: str, why: str, *names: str) -> None:
    for name in names:
        PY_ORIGIN_RULES[name] = (rule, why)


_origins("introspection", "reads interpreter internals",
         "sys._getframe", "sys._current_frames", "sys.modules", "sys.settrace", "sys.setprofile",
         "sys.gettrace", "sys.getprofile", "sys.addaudithook", "sys.meta_path", "sys.path_hooks",
         "sys.path_importer_cache", "sys.exc_info", "sys.exception", "sys.getrefcount",
         "sys._xoptions", "sys.excepthook", "sys.displayhook", "torch.Tensor._make_subclass",
         "torch.Tensor._make_wrapper_subclass", "torch.autograd.graph")
_origins("io_access", "reads the command line, standard input, or files",
         "sys.argv", "sys.orig_argv", "sys.stdin", "sys.path", "io.open", "io.open_code",
         "io.FileIO", "torch.load", "torch.save", "numpy.load", "numpy.save", "numpy.savez",
         "numpy.fromfile", "numpy.memmap", "numpy.loadtxt", "numpy.savetxt", "numpy.genfromtxt",
         "torch.utils.cpp_extension.load", "torch.utils.cpp_extension.CppExtension",
         "torch.utils.cpp_extension.CUDAExtension", "torch.utils.cpp_extension.BuildExtension",
         "torch.from_file", "torch.Storage.from_file", "torch.UntypedStorage.from_file")
_origins("concurrency", "runs work outside the current stream or thread count the judge sets",
         "torch.cuda.Stream", "torch.cuda.stream", "torch.cuda.current_stream",
         "torch.cuda.default_stream", "torch.cuda.set_stream", "torch.cuda.ExternalStream",
         "torch.cuda.StreamContext", "torch.cuda.streams", "torch.cuda.graph",
         "torch.cuda.CUDAGraph", "torch.cuda.graphs", "torch.cuda.make_graphed_callables",
         "torch.Stream", "torch.set_num_threads", "torch.set_num_interop_threads",
         "os.fork", "os.forkpty", "os.system", "os.popen", "os.spawnl", "os.spawnle",
         "os.spawnlp", "os.spawnlpe", "os.spawnv", "os.spawnve", "os.spawnvp", "os.spawnvpe",
         "os.execl", "os.execle", "os.execlp", "os.execlpe", "os.execv", "os.execve", "os.execvp",
         "os.execvpe", "os.posix_spawn", "os.posix_spawnp", "os.kill", "os.register_at_fork")
_origins("native_access", "calls native code directly",
         "torch.cuda.cudart", "torch.ops.load_library", "torch.classes", "torch.cuda.nvtx._nvtx",
         "torch.utils.cpp_extension.load_library")
_origins("numerics_flags", "changes global numerics or random state",
         "torch.backends", "torch.set_float32_matmul_precision", "torch.use_deterministic_algorithms",
         "torch.set_deterministic_debug_mode", "torch.set_flush_denormal", "torch.set_default_dtype",
         "torch.set_default_tensor_type", "torch.set_default_device", "torch.manual_seed",
         "torch.seed", "torch.initial_seed", "torch.set_rng_state", "torch.random",
         "torch.cuda.manual_seed", "torch.cuda.manual_seed_all", "torch.cuda.seed",
         "torch.cuda.seed_all", "torch.cuda.set_rng_state", "torch.cuda.set_rng_state_all",
         "torch.cuda.amp", "torch.cpu.amp", "torch.amp", "torch.autocast",
         "torch.set_autocast_enabled", "torch.set_autocast_gpu_dtype", "torch.set_autocast_dtype",
         "torch.cuda.matmul", "random.seed", "random.setstate", "numpy.random.seed",
         "numpy.random.set_state", "numpy.seterr", "numpy.random.default_rng")
_origins("monkeypatch", "changes PyTorch for everyone in the process",
         "torch.library", "torch.nn.modules.module.register_module_forward_hook",
         "torch.nn.modules.module.register_module_forward_pre_hook",
         "torch.nn.modules.module.register_module_full_backward_hook",
         "torch.nn.modules.module.register_module_module_registration_hook",
         "torch.nn.modules.module.register_module_buffer_registration_hook",
         "torch.nn.modules.module.register_module_parameter_registration_hook",
         "torch.utils.hooks")
_origins("dynamic_code", "builds functions or code objects at runtime",
         "types.FunctionType", "types.CodeType", "types.LambdaType", "types.MethodType",
         "types.ModuleType", "operator.attrgetter", "operator.methodcaller", "torch.jit.load",
         "torch.package", "torch.export.load")
_origins("exception_fallback", "swallows exceptions, a silent fallback", "contextlib.suppress")
_origins("library_use", "computes with a library the rules do not allow",
         "einops.einsum", "einops.reduce", "einops.repeat")

# torch.backends.X.Y that only read facts: calling them changes nothing.
TORCH_BACKENDS_QUERIES: frozenset[str] = frozenset({
    "is_available", "version", "is_built", "is_flash_attention_available",
    "flash_sdp_enabled", "mem_efficient_sdp_enabled", "math_sdp_enabled", "cudnn_sdp_enabled",
})

# torch.<namespace> that compute when referenced or called.
TORCH_COMPUTE_NAMESPACES: tuple[str, ...] = (
    "torch.nn.functional", "torch.special", "torch.linalg", "torch.fft", "torch.ops",
    "torch.sparse", "torch.nested", "torch.masked", "torch.func", "torch.vmap", "torch.compile",
    "torch.jit", "torch.fx", "torch.export", "torch.autograd.grad", "torch.autograd.backward",
    "torch.autograd.functional", "torch.nn.utils", "torch.distributions", "torch.signal",
    "torch.compiler", "torch.onnx", "torch.ao", "torch.quantization", "torch.testing",
    "torch.cuda.jiterator", "torch.cuda.comm", "torch.utils.checkpoint",
)

# numpy functions that compute (numpy in forward is another library doing the work).
NUMPY_COMPUTE: frozenset[str] = COMPUTE_FUNCTIONS - frozenset({"prod", "max", "min", "all", "any"})

# Python builtins by rule (when the file does not bind the name itself).
PY_BUILTIN_RULES: dict[str, tuple[str, str]] = {
    "exec": ("dynamic_code", "runs code built at runtime"),
    "eval": ("dynamic_code", "runs code built at runtime"),
    "compile": ("dynamic_code", "builds code objects at runtime"),
    "__import__": ("dynamic_code", "imports modules by a runtime name"),
    "globals": ("introspection", "reads the module namespace"),
    "locals": ("introspection", "reads a frame's namespace"),
    "vars": ("introspection", "reads an object's namespace"),
    "breakpoint": ("introspection", "enters the debugger"),
    "open": ("io_access", "opens files"),
    "input": ("io_access", "reads standard input"),
    "__builtins__": ("introspection", "reaches the builtins namespace"),
}

# Attribute names that reach into frames, code objects and namespaces.
INTROSPECTION_ATTRIBUTES: frozenset[str] = frozenset({
    "f_back", "f_globals", "f_locals", "f_code", "f_builtins", "f_trace", "tb_frame", "tb_next",
    "gi_frame", "gi_code", "cr_frame", "cr_code", "ag_frame", "ag_code", "__code__",
    "__globals__", "__closure__", "__subclasses__", "__mro__", "__bases__", "__base__",
    "__builtins__", "__loader__", "__spec__", "__self__", "__func__", "__wrapped__", "co_code",
    "co_consts", "co_names", "__torch_function__", "__torch_dispatch__", "__dict__",
})
DYNAMIC_ATTRIBUTES: frozenset[str] = frozenset({"__getattribute__", "__import__"})

# --------------------------------------------------------------------------------------------
# C++: torch:: / at:: / c10::
# --------------------------------------------------------------------------------------------
# Lower-case functions allowed after ``torch::`` or ``at::`` (the path after the first part).
TORCH_CPP_ALLOWED: frozenset[str] = frozenset({
    "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full",
    "full_like", "from_blob", "tensor", "arange", "scalar_tensor", "dtype", "device", "layout",
    "requires_grad", "memory_format", "pinned_memory", "elementSize", "toString",
    "typeMetaToScalarType", "scalarTypeToTypeMeta", "isFloatingType", "isComplexType",
    "isIntegralType", "isReducedFloatingType", "nullopt", "make_optional", "ceil_div",
    "parallel_for", "get_num_threads", "get_thread_num", "in_parallel_region", "irange",
    "cuda::getCurrentCUDAStream", "cuda::getDefaultCUDAStream", "cuda::getCurrentDeviceProperties",
    "cuda::getDeviceProperties", "cuda::current_device", "cuda::device_count",
    "cuda::getCurrentCUDABlasHandle", "cuda::getCurrentCUDABlasLtHandle",
    "cuda::getCUDABlasLtWorkspace", "cuda::getCUDABlasLtWorkspaceSize",
    "cuda::getCurrentCUDADnnHandle", "cuda::getCudnnHandle",
    "cuda::getCUDADeviceAllocator", "cuda::warp_size", "cuda::stream_synchronize",
    "cuda::device_synchronize", "cuda::is_available", "cuda::synchronize", "cuda::check",
    "cuda::getNumGPUs", "cuda::set_device", "cuda::get_device", "device_of", "numeric_limits",
    "rand", "randn", "randint", "randperm", "rand_like", "randn_like", "randint_like",
    "checkDim", "checkSize", "checkContiguous", "checkAllContiguous", "checkSameGPU",
    "checkAllSameGPU", "checkScalarType", "checkSameType", "checkAllSameType", "checkDeviceType",
    "checkNumel", "checkDimRange", "checkSameSize",
})
# Namespaces under torch:: / at:: whose every name computes (or builds modules that do).
TORCH_CPP_COMPUTE_NAMESPACES: frozenset[str] = frozenset({
    "native", "nn", "autograd", "optim", "functional", "linalg", "fft", "special", "data",
    "serialize", "cpu", "meta", "compositeexplicitautograd", "compositeimplicitautograd",
    "sparse", "nested", "_ops", "blas",
})
TORCH_CPP_INTROSPECTION: frozenset[str] = frozenset({"jit", "impl", "python", "profiler"})
TORCH_CPP_NUMERICS: frozenset[str] = frozenset({
    "globalContext", "manual_seed", "setAllowTF32CuBLAS", "setAllowTF32CuDNN",
    "setFloat32MatmulPrecision", "setBenchmarkCuDNN", "setDeterministicCuDNN",
    "setDeterministicAlgorithms", "setAllowFP16ReductionCuBLAS", "setAllowBF16ReductionCuBLAS",
    "setFlushDenormal", "setUserEnabledCuDNN", "setAllowFP16ReductionCPU", "set_default_dtype",
    "setSDPUseFlash", "setSDPUseMemEfficient", "setSDPUseMath", "setBlasPreferredBackend",
})
TORCH_CPP_CONCURRENCY: frozenset[str] = frozenset({
    "set_num_threads", "set_num_interop_threads", "setCurrentCUDAStream", "launch",
    "intraop_launch", "intraop_launch_future",
})
TORCH_CPP_DISPATCH: frozenset[str] = frozenset({
    "Dispatcher", "OperatorHandle", "KernelFunction", "TypedOperatorHandle", "RegisterOperators",
    "Library", "TensorIterator", "TensorIteratorConfig", "TensorIteratorBase",
})
STREAM_POOL: frozenset[str] = frozenset({"getStreamFromPool", "getStreamFromExternal"})

# thrust:: names that are plain types, not algorithms.
THRUST_ALLOWED: frozenset[str] = frozenset({
    "complex", "pair", "tuple", "get", "make_pair", "make_tuple", "tie",
})
# First components of C++ qualified names that are compute libraries.
CPP_LIBRARY_NAMESPACES: dict[str, str] = {
    "cutlass": "CUTLASS", "cute": "CuTe (CUTLASS)", "Eigen": "Eigen", "dnnl": "oneDNN",
    "tbb": "oneTBB", "oneapi": "oneAPI", "mkl": "MKL", "cudnn_frontend": "the cuDNN frontend",
    "cufftdx": "cuFFTDx", "cublasdx": "cuBLASDx", "xt": "xtensor", "blaze": "Blaze",
    "arma": "Armadillo", "mshadow": "mshadow", "flashinfer": "FlashInfer", "tl": "TileLang",
    "ck": "Composable Kernel",
}
# Identifier prefixes of compute libraries (case-sensitive), and what they are.
CPP_LIBRARY_PREFIXES: tuple[tuple[str, str], ...] = (
    ("cufft", "cuFFT"), ("curand", "cuRAND"), ("cusparse", "cuSPARSE"), ("cusolver", "cuSOLVER"),
    ("nccl", "NCCL"), ("cutensor", "cuTENSOR"), ("nvshmem", "NVSHMEM"), ("nvjpeg", "nvJPEG"),
    ("nppi", "NPP"), ("npps", "NPP"), ("cblas_", "CBLAS"), ("mkl_", "MKL"),
    ("LAPACKE_", "LAPACK"), ("dnnl_", "oneDNN"), ("fftw", "FFTW"), ("openblas_", "OpenBLAS"),
)

CUBLAS_SETUP: frozenset[str] = frozenset({
    "cublasCreate", "cublasCreate_v2", "cublasDestroy", "cublasDestroy_v2", "cublasSetStream",
    "cublasSetStream_v2", "cublasGetStream", "cublasGetStream_v2", "cublasSetWorkspace",
    "cublasSetWorkspace_v2", "cublasSetMathMode", "cublasGetMathMode", "cublasSetPointerMode",
    "cublasSetPointerMode_v2", "cublasGetPointerMode", "cublasGetPointerMode_v2",
    "cublasGetStatusString", "cublasGetStatusName", "cublasGetVersion", "cublasGetVersion_v2",
    "cublasGetProperty", "cublasGetCudartVersion", "cublasSetAtomicsMode",
    "cublasGetAtomicsMode", "cublasSetSmCountTarget", "cublasGetSmCountTarget", "cublasLtCreate",
    "cublasLtDestroy", "cublasLtGetStatusString", "cublasLtGetStatusName", "cublasLtGetVersion",
    "cublasLtGetCudartVersion", "cublasLtGetProperty",
})
CUDNN_SETUP: frozenset[str] = frozenset({
    "cudnnCreate", "cudnnDestroy", "cudnnSetStream", "cudnnGetStream", "cudnnGetErrorString",
    "cudnnGetVersion", "cudnnGetCudartVersion", "cudnnGetProperty", "cudnnAddTensor",
    "cudnnGetLastErrorString", "cudnnGetMaxDeviceVersion",
})

# Free functions by rule. ``call`` entries count only when called (``name(``) unqualified, or
# qualified by ``std::`` or the global ``::``, and not defined in the sources themselves.
CPP_CALL_RULES: dict[str, tuple[str, str]] = {}
CPP_NAME_RULES: dict[str, tuple[str, str]] = {}


def _cpp(table: dict, rule: str, why: str, *names: str) -> None:
    for name in names:
        table[name] = (rule, why)


_cpp(CPP_CALL_RULES, "concurrency", "starts a process or a shell",
     "fork", "vfork", "system", "popen", "execv", "execve", "execvp", "execvpe", "execl", "execlp",
     "execle", "fexecve", "posix_spawn", "posix_spawnp", "clone3", "kill", "raise")
_cpp(CPP_CALL_RULES, "io_access", "reaches files, the network or the environment",
     "open", "openat", "creat", "read", "write", "pread", "pwrite", "readv", "writev", "unlink",
     "rename", "mkdir", "rmdir", "opendir", "readdir", "socket", "connect", "sendto", "recvfrom",
     "truncate", "ftruncate", "chdir", "symlink", "link")
_cpp(CPP_CALL_RULES, "exception_fallback", "installs a handler that can recover from faults",
     "signal", "sigaction")
_cpp(CPP_NAME_RULES, "concurrency", "changes the thread count the judge sets",
     "omp_set_num_threads", "omp_set_dynamic", "omp_set_max_active_levels", "omp_set_nested",
     "kmp_set_defaults", "mkl_set_num_threads")
_cpp(CPP_NAME_RULES, "io_access", "reaches files, the network or the environment",
     "fopen", "fopen64", "freopen", "fdopen", "getenv", "secure_getenv", "setenv", "putenv",
     "unsetenv", "clearenv", "environ", "getaddrinfo", "gethostbyname", "ifstream", "ofstream",
     "fstream", "filebuf", "basic_ifstream", "basic_ofstream", "basic_fstream", "basic_filebuf",
     "cuFileRead", "cuFileWrite", "cuFileHandleRegister", "memfd_create", "tmpfile", "mkstemp",
     "shm_open", "inotify_init")
_cpp(CPP_NAME_RULES, "native_access", "loads or patches native code directly",
     "dlopen", "dlsym", "dlvsym", "dlmopen", "dlinfo", "dl_iterate_phdr", "mprotect", "ptrace",
     "process_vm_readv", "process_vm_writev", "syscall", "cuGetProcAddress", "cuGetProcAddress_v2",
     "cudaGetDriverEntryPoint", "cudaGetDriverEntryPointByVersion", "cuGetExportTable",
     "cudaGetExportTable", "LoadLibrary", "LoadLibraryA", "GetProcAddress")
_cpp(CPP_NAME_RULES, "unjoined_stream", "runs host work the timing never waits for",
     "cudaLaunchHostFunc", "cudaStreamAddCallback", "cuLaunchHostFunc", "cuStreamAddCallback",
     "pthread_detach")
_cpp(CPP_NAME_RULES, "exception_fallback", "jumps out of a failing path to another one",
     "catch", "setjmp", "longjmp", "sigsetjmp", "siglongjmp", "_setjmp", "_longjmp",
     "__builtin_setjmp", "__builtin_longjmp", "set_terminate", "set_unexpected")
_cpp(CPP_NAME_RULES, "introspection", "reads the call stack or the interpreter",
     "__builtin_frame_address", "__builtin_return_address", "backtrace", "backtrace_symbols",
     "_Unwind_Backtrace", "PyFrame_GetBack")
_cpp(CPP_NAME_RULES, "numerics_flags", "changes global numerics settings",
     *TORCH_CPP_NUMERICS, "_MM_SET_FLUSH_ZERO_MODE", "_MM_SET_DENORMALS_ZERO_MODE",
     "_mm_setcsr", "fesetround", "fesetenv", "feupdateenv", "feenableexcept", "fedisableexcept",
     "__builtin_ia32_ldmxcsr")
_cpp(CPP_NAME_RULES, "monkeypatch", "registers or overrides PyTorch operators",
     "TORCH_LIBRARY", "TORCH_LIBRARY_IMPL", "TORCH_LIBRARY_FRAGMENT", "TORCH_LIBRARY_init",
     "TORCH_LIBRARY_IMPL_init", "C10_REGISTER_TYPED_CLASS", "REGISTER_DISPATCH",
     "TORCH_LIBRARY_FRAGMENT_init")
_cpp(CPP_NAME_RULES, "library_use", "is a BLAS routine, a compute library",
     "sgemm_", "dgemm_", "hgemm_", "sgemv_", "dgemv_", "saxpy_", "daxpy_", "sdot_", "ddot_")
_cpp(CPP_NAME_RULES, "dynamic_code", "compiles or loads device code at runtime",
     "cuModuleLoad", "cuModuleLoadData", "cuModuleLoadDataEx", "cuModuleLoadFatBinary",
     "cuLibraryLoadData", "cuLibraryLoadFromFile", "cudaLibraryLoadData",
     "cudaLibraryLoadFromFile", "cuLinkCreate", "cuLinkAddData", "cuLinkAddFile",
     "cuLinkComplete")

STREAM_CREATE: frozenset[str] = frozenset({
    "cudaStreamCreate", "cudaStreamCreateWithFlags", "cudaStreamCreateWithPriority",
    "cuStreamCreate", "cuStreamCreateWithPriority",
})
STREAM_JOIN: frozenset[str] = frozenset({
    "cudaStreamSynchronize", "cudaStreamWaitEvent", "cudaDeviceSynchronize",
    "cudaEventSynchronize", "cuStreamSynchronize", "cuStreamWaitEvent", "cuCtxSynchronize",
    "cuEventSynchronize",
})
# Identifiers that start a C++ declaration context rather than a call (for "defined here").
CPP_NOT_DECLARATORS: frozenset[str] = frozenset({
    "return", "else", "case", "throw", "co_return", "co_await", "co_yield", "new", "delete",
    "sizeof", "alignof", "decltype", "typeid", "do", "goto", "not", "and", "or", "if", "while",
    "for", "switch", "noexcept", "static_assert", "defined", "assert",
})

# ATen functions that, after ``using namespace torch/at``, compute when called unqualified.
# C and CUDA math names (exp, tanh, fmaxf, ...) are left out: device code calls those.
UNQUALIFIED_ATEN_COMPUTE: frozenset[str] = frozenset({
    "matmul", "mm", "bmm", "addmm", "baddbmm", "addbmm", "einsum", "linear", "bilinear",
    "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
    "convolution", "softmax", "log_softmax", "relu", "relu_", "gelu", "silu", "sigmoid",
    "layer_norm", "group_norm", "batch_norm", "instance_norm", "rms_norm", "dropout", "cat",
    "stack", "sum", "mean", "amax", "amin", "argmax", "argmin", "logsumexp", "cumsum", "cumprod",
    "clamp", "clamp_min", "clamp_max", "where", "gather", "scatter", "index_select", "topk",
    "sort", "argsort", "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d", "mv", "dot", "outer",
    "tensordot", "scaled_dot_product_attention", "embedding", "masked_fill", "repeat_interleave",
    "hardtanh", "leaky_relu", "elu", "selu", "softplus", "mish", "hardswish", "hardsigmoid",
    "norm", "var", "std", "prod", "triu", "tril", "flip", "roll", "cross", "cdist",
})

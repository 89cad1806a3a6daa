"""What kind of work the reference does, read from the task's AST: matrix products (GEMM-like ops)
and convolutions. This decides the library allow-list: cuBLAS only where the task multiplies
matrices (or convolves: a convolution lowered to a GEMM is still the task's own op), cuDNN only
where it convolves.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import lru_cache

from .pynames import Names

# Functions (resolved dotted origins) that are matrix products.
GEMM_FUNCTIONS = frozenset({
    "torch.matmul", "torch.mm", "torch.bmm", "torch.addmm", "torch.addbmm", "torch.baddbmm",
    "torch.addmv", "torch.mv", "torch.einsum", "torch.tensordot", "torch.chain_matmul",
    "torch.inner", "torch.outer", "torch.ger", "torch.kron", "torch.linalg.matmul",
    "torch.linalg.multi_dot", "torch.linalg.vecdot", "torch.nn.functional.linear",
    "torch.nn.functional.bilinear", "torch.nn.functional.scaled_dot_product_attention",
    "torch.nn.functional.multi_head_attention_forward", "torch.nn.Linear", "torch.nn.LazyLinear",
    "torch.nn.Bilinear", "torch.nn.MultiheadAttention", "torch.nn.Transformer",
    "torch.nn.TransformerEncoder", "torch.nn.TransformerDecoder",
    "torch.nn.TransformerEncoderLayer", "torch.nn.TransformerDecoderLayer", "torch.nn.RNN",
    "torch.nn.LSTM", "torch.nn.GRU", "torch.nn.RNNCell", "torch.nn.LSTMCell", "torch.nn.GRUCell",
    "torch.Tensor.matmul", "torch.Tensor.mm", "torch.Tensor.bmm", "torch.Tensor.addmm",
    "torch.Tensor.baddbmm", "torch.Tensor.addbmm", "torch.Tensor.mv", "torch.Tensor.addmv",
    "torch.Tensor.__matmul__", "operator.matmul", "operator.imatmul", "numpy.matmul",
    "numpy.dot", "numpy.einsum",
})
GEMM_METHODS = frozenset({
    "matmul", "mm", "bmm", "addmm", "addmm_", "baddbmm", "baddbmm_", "addbmm", "addbmm_", "mv",
    "addmv", "addmv_", "__matmul__", "__rmatmul__", "outer", "inner", "ger",
})
CONV_FUNCTIONS = frozenset({
    "torch.nn.Conv1d", "torch.nn.Conv2d", "torch.nn.Conv3d", "torch.nn.ConvTranspose1d",
    "torch.nn.ConvTranspose2d", "torch.nn.ConvTranspose3d", "torch.nn.LazyConv1d",
    "torch.nn.LazyConv2d", "torch.nn.LazyConv3d", "torch.nn.LazyConvTranspose1d",
    "torch.nn.LazyConvTranspose2d", "torch.nn.LazyConvTranspose3d",
    "torch.nn.functional.conv1d", "torch.nn.functional.conv2d", "torch.nn.functional.conv3d",
    "torch.nn.functional.conv_transpose1d", "torch.nn.functional.conv_transpose2d",
    "torch.nn.functional.conv_transpose3d", "torch.conv1d", "torch.conv2d", "torch.conv3d",
    "torch.conv_transpose1d", "torch.conv_transpose2d", "torch.conv_transpose3d",
    "torch.convolution", "torch.conv_tbc", "torch.cudnn_convolution",
})


@dataclass(frozen=True)
class TaskOps:
    gemm: bool = False
    conv: bool = False

    @property
    def allows_cublas(self) -> bool:
        return self.gemm or self.conv

    @property
    def allows_cudnn(self) -> bool:
        return self.conv


def _qualified(origin: str) -> list[str]:
    """The origin and its spellings through torch.nn.modules / torch.functional."""
    out = [origin]
    parts = origin.split(".")
    if parts[:3] == ["torch", "nn", "modules"] and len(parts) >= 5:
        out.append("torch.nn." + ".".join(parts[4:]))
    if parts[:2] == ["torch", "functional"]:
        out.append("torch." + ".".join(parts[2:]))
    return out


@lru_cache(maxsize=256)
def task_ops(source: str) -> TaskOps:
    """GEMM-like and convolution ops anywhere in the task's source (both False if unreadable)."""
    try:
        tree = ast.parse(source)
        names = Names(tree)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return TaskOps()
    gemm = conv = False
    for node in ast.walk(tree):
        if isinstance(node, (ast.BinOp, ast.AugAssign)) and isinstance(node.op, ast.MatMult):
            gemm = True
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in GEMM_METHODS:
                gemm = True
        if isinstance(node, (ast.Name, ast.Attribute)):
            for origin in names.resolve(node):
                for spelled in _qualified(origin):
                    gemm = gemm or spelled in GEMM_FUNCTIONS
                    conv = conv or spelled in CONV_FUNCTIONS
        if gemm and conv:
            break
    return TaskOps(gemm=gemm, conv=conv)

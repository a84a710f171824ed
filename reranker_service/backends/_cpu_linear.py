"""Faster ``nn.Linear`` kernels for CPU inference: what the ``cpu_linear`` setting does to a backbone.

On a CPU a transformer's time is nearly all in its Linear layers (MiniLM at 128 tokens, batch 1:
87% of a forward pass in ``aten::addmm``, 6% in attention). torch computes a float32 ``nn.Linear``
with MKL's ``addmm``, and does it with the weight in its plain layout on every call. The kinds:

* ``torch``: torch's own ``nn.Linear`` (the naive server's path): the reference.
* ``onednn``: float32, each weight reordered once into oneDNN's blocked layout and run through
  ``torch.ops.mkldnn._linear_pointwise`` (the kernel ``torch.compile``'s CPU weight prepacking
  emits). Values equal the reference up to the order of summation (about 1e-7 absolute on a value
  model's outputs); within a batch, two identical inputs may differ by that much.
* ``int8``: dynamic int8 quantization (:class:`Int8Linear`): int8 weights per output channel, each
  token's activations quantized per call with its own scale, an int8 GEMM with int32 accumulation.
  Approximate: rankings can change; opt-in only. (``torch.ao.quantization.quantize_dynamic``, which
  torch 2.13 deprecates in favour of torchao, was slower and quantizes activations per tensor: ten
  times the mean error on a trained value model; torchao 0.18's per-token scheme is barely faster
  than float32 on CPU without ``torch.compile``.)
* ``bf16``: bfloat16 weights (prepacked for oneDNN) and inputs of every Linear, float32 outputs and
  float32 everywhere else. Approximate: rankings can change; opt-in only.

``auto`` is ``onednn`` on a CPU whose torch has oneDNN, else ``torch``. Only a backbone's
``nn.Linear`` modules are replaced (not the value head, not attention, norms or embeddings), in
place, once at load; the model can then no longer be trained, copied or moved to another device.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

__all__ = ["APPROXIMATE_KINDS", "CPU_LINEAR_KINDS", "apply_cpu_linear", "resolve_cpu_linear"]

CPU_LINEAR_KINDS: tuple[str, ...] = ("auto", "torch", "onednn", "int8", "bf16")
#: the kinds whose values differ from float32 by more than the order of summation
APPROXIMATE_KINDS: frozenset[str] = frozenset({"int8", "bf16"})


def onednn_available() -> bool:
    """Whether this torch build has oneDNN and its prepacked linear kernel."""
    return bool(torch.backends.mkldnn.is_available()) and hasattr(torch.ops.mkldnn, "_linear_pointwise")


def resolve_cpu_linear(kind: str, device: str | torch.device) -> str:
    """The kind that runs for ``kind`` on ``device``: ``auto`` resolved, ``torch`` off the CPU.

    Raises:
        ValueError: ``kind`` is unknown, or names CPU kernels for another device, or needs oneDNN
            that this torch lacks.
    """
    if kind not in CPU_LINEAR_KINDS:
        raise ValueError(f"cpu_linear must be one of {', '.join(CPU_LINEAR_KINDS)}, got {kind!r}")
    on_cpu = torch.device(device).type == "cpu"
    if kind == "auto":
        return "onednn" if on_cpu and onednn_available() else "torch"
    if kind != "torch" and not on_cpu:
        raise ValueError(
            f"cpu_linear={kind} is for CPU inference; the model is on {device} (use auto or torch)"
        )
    if kind in ("onednn", "bf16") and not onednn_available():
        raise ValueError(f"cpu_linear={kind} needs a torch built with oneDNN (mkldnn); use torch or int8")
    if kind == "int8" and not hasattr(torch, "_int_mm"):
        raise ValueError("cpu_linear=int8 needs torch._int_mm (torch >= 2.2); use torch or onednn")
    return kind


class PackedLinear(nn.Module):
    """An inference-only ``nn.Linear`` whose weight is reordered once into oneDNN's layout.

    Args:
        linear: the layer to replace (its weight and bias are copied).
        dtype: the compute dtype (``torch.float32``, or ``torch.bfloat16``: inputs are cast to it
            and outputs back to the input's dtype).
    """

    def __init__(self, linear: nn.Linear, *, dtype: torch.dtype = torch.float32) -> None:
        super().__init__()
        self.in_features, self.out_features, self.dtype = linear.in_features, linear.out_features, dtype
        with torch.no_grad():
            self.packed = torch.ops.mkldnn._reorder_linear_weight(linear.weight.detach().to(dtype))
            self.bias = None if linear.bias is None else linear.bias.detach().to(dtype).clone()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.ops.mkldnn._linear_pointwise(x.to(self.dtype), self.packed, self.bias, "none", [], "")
        return y if y.dtype == x.dtype else y.to(x.dtype)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, dtype={self.dtype}"


# rows per int8 block (quantize, GEMM, rescale): a block's intermediates stay small and are reused; a
# batch's whole (rows, features) intermediates are fresh multi-MB buffers whose first touch cost 4x
# the GEMM itself
_BLOCK_ROWS = 128


class Int8Linear(nn.Module):
    """An inference-only ``nn.Linear`` computed as an int8 GEMM (dynamic quantization).

    The weight is quantized once, symmetrically, with one scale per output channel; each input row
    (token) is quantized on every call with its own scale (the activation scheme torchao's
    ``Int8DynamicActivationInt8WeightConfig`` uses, here without torchao or ``torch.compile``); the
    product accumulates in int32 (``torch._int_mm``) and is rescaled to float32.

    Args:
        linear: the layer to replace (its weight and bias are copied).
    """

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        with torch.no_grad():
            weight = linear.weight.detach().float()
            self.weight_scale = weight.abs().amax(dim=1).clamp(min=1e-12) / 127
            quantized = torch.round(weight / self.weight_scale[:, None]).clamp(-127, 127).to(torch.int8)
            self.weight_t = quantized.t()  # (in, out) view of the (out, in) rows: _int_mm's fast layout
            bias = torch.zeros(self.out_features) if linear.bias is None else linear.bias.detach().float()
            self.bias = bias.clone()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, self.in_features).float()
        out = torch.empty(rows.shape[0], self.out_features)
        for start in range(0, rows.shape[0], _BLOCK_ROWS):
            block = rows[start : start + _BLOCK_ROWS]
            scale = block.abs().amax(dim=1, keepdim=True).clamp(min=1e-12) / 127
            quantized = torch.round(block / scale).clamp_(-127, 127).to(torch.int8)
            product = torch._int_mm(quantized, self.weight_t) * scale
            torch.addcmul(self.bias, product, self.weight_scale, out=out[start : start + _BLOCK_ROWS])
        return out.reshape(*x.shape[:-1], self.out_features).to(x.dtype)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}"


def _replace_linears(module: nn.Module, make: Callable[[nn.Linear], nn.Module]) -> int:
    count = 0
    for name, child in module.named_children():
        if type(child) is nn.Linear:
            setattr(module, name, make(child))
            count += 1
        else:
            count += _replace_linears(child, make)
    return count


def apply_cpu_linear(backbone: nn.Module, kind: str) -> nn.Module:
    """Swap ``backbone``'s ``nn.Linear`` layers for ``kind``'s kernels, in place (see the module docstring).

    ``kind`` must be resolved (:func:`resolve_cpu_linear`); ``torch`` leaves the backbone as it is.

    Returns:
        The backbone.
    """
    if kind == "torch":
        return backbone
    if backbone.training:
        raise ValueError("cpu_linear kernels are for inference: call .eval() first")
    if kind == "int8":
        _replace_linears(backbone, Int8Linear)
        return backbone
    if kind in ("onednn", "bf16"):
        dtype = torch.bfloat16 if kind == "bf16" else torch.float32
        _replace_linears(backbone, lambda linear: PackedLinear(linear, dtype=dtype))
        return backbone
    raise ValueError(f"cpu_linear {kind!r} is not a resolved kind (one of torch, onednn, int8, bf16)")

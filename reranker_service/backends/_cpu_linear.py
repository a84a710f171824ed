"""Faster ``nn.Linear`` kernels for CPU inference: what the ``cpu_linear`` setting does to a backbone.

On a CPU a transformer's time is nearly all in its Linear layers (MiniLM at 128 tokens, batch 1:
87% of a forward pass in ``aten::addmm``, 6% in attention). torch computes a float32 ``nn.Linear``
with MKL's ``addmm``, and does it with the weight in its plain layout on every call. The kinds:

* ``torch``: torch's own ``nn.Linear`` (the naive server's path): the reference.
* ``onednn``: float32, each weight reordered once into oneDNN's blocked layout and run through
  ``torch.ops.mkldnn._linear_pointwise`` (the kernel ``torch.compile``'s CPU weight prepacking
  emits). Values equal the reference up to the order of summation (about 1e-7 absolute on a value
  model's outputs); within a batch, two identical inputs may differ by that much.
* ``int8``: dynamic int8 quantization (``torch.ao``): int8 weights per output channel, activations
  quantized per call, an int8 GEMM. Approximate: rankings change; opt-in only.
* ``bf16``: bfloat16 weights (prepacked for oneDNN) and inputs of every Linear, float32 outputs and
  float32 everywhere else. Approximate: rankings can change; opt-in only.

``auto`` is ``onednn`` on a CPU whose torch has oneDNN, else ``torch``. Only a backbone's
``nn.Linear`` modules are replaced (not the value head, not attention, norms or embeddings), in
place, once at load; the model can then no longer be trained, copied or moved to another device.
"""

from __future__ import annotations

import warnings

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


def _replace_linears(module: nn.Module, dtype: torch.dtype) -> int:
    count = 0
    for name, child in module.named_children():
        if type(child) is nn.Linear:
            setattr(module, name, PackedLinear(child, dtype=dtype))
            count += 1
        else:
            count += _replace_linears(child, dtype)
    return count


def _quantize_int8(backbone: nn.Module) -> nn.Module:
    from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

    with warnings.catch_warnings():
        # torch.ao.quantization announces its move to torchao; torch 2.13 still ships and runs it
        warnings.filterwarnings(
            "ignore", message=r"torch\.ao\.quantization is deprecated", category=DeprecationWarning
        )
        warnings.filterwarnings("ignore", message=r".*quantize_per_(tensor|channel).*", category=UserWarning)
        return quantize_dynamic(backbone, {nn.Linear: per_channel_dynamic_qconfig}, inplace=True)


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
        return _quantize_int8(backbone)
    if kind in ("onednn", "bf16"):
        _replace_linears(backbone, torch.bfloat16 if kind == "bf16" else torch.float32)
        return backbone
    raise ValueError(f"cpu_linear {kind!r} is not a resolved kind (one of torch, onednn, int8, bf16)")

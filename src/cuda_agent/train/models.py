"""Checks on a model path and a device, made before any long work starts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .extras import TrainError

FINAL = "final"  # a stage's finished model: OUT/STAGE/final


def check_model_path(path: str | Path) -> str:
    """A local model directory must hold a config.json; anything else must look like a hub id."""
    text = str(path)
    local = Path(text)
    if local.exists():
        if not (local / "config.json").is_file():
            raise TrainError(f"{local} holds no config.json: give a Hugging Face model directory "
                             "(save_pretrained output) or a hub id such as Qwen/Qwen2.5-0.5B-Instruct")
        return str(local.resolve())
    if text.startswith((".", "/", "~")) or text.count("/") != 1:
        raise TrainError(f"the model path {text} does not exist; give a model directory or a hub id (org/name)")
    return text


def resolve_device(device: str | None) -> str:
    """'cuda' or 'cpu'; asking for cuda without a GPU is an error, not a silent fall back."""
    import torch

    if device in (None, "auto"):
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise TrainError("--device cuda was asked for but no GPU is visible; use --device cpu")
    if device not in ("cuda", "cpu"):
        raise TrainError(f"unknown device {device!r}; use cuda or cpu")
    return device


def last_checkpoint(out: Path) -> str | None:
    """The newest ``checkpoint-N`` a Trainer left in ``out``, to resume from."""
    found = sorted((p for p in out.glob("checkpoint-*") if p.name.split("-")[-1].isdigit()),
                   key=lambda p: int(p.name.split("-")[-1]))
    return str(found[-1]) if found else None


def save_final(trainer: Any, tokenizer: Any, out: Path) -> Path:
    """Save the trained model and its tokenizer to ``out/final`` through a staging folder, so a
    crash never leaves a half-written final model that a rerun would take as done."""
    final = Path(out) / FINAL
    staging = Path(out) / (FINAL + ".tmp")
    trainer.save_model(str(staging))
    tokenizer.save_pretrained(str(staging))
    staging.replace(final)
    return final


def reward_key(score: float) -> str:
    """A reward as a count's key: whole rewards as integers (Eq. 1's -1, 1, 2, 3), others to 2 places."""
    return str(int(score)) if score == int(score) else f"{score:.2f}"

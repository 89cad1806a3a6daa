"""Rejection fine-tuning on TRL's ``SFTTrainer``: the RFT rows, loss on the assistant's tokens only.

Rows are the RFT Parquet's (``messages`` with ``tool_calls`` and ``tools``). ``tool_format``
says how the model reads tool calls, and must be how it is then sampled: ``native`` (the default)
hands ``tool_calls`` and ``tools`` to the model's own chat template, as TRL's agentic GRPO and
verl's agent loop drive it; ``text`` renders them in the agent's text protocol (the format the
project's local Hugging Face client speaks: tools described in the system prompt, ``<tool_call>``
blocks, ``<tool_result>`` turns), as the CPU demo's model is driven.
Checkpoints go to ``out`` as training goes; a rerun resumes from the newest.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import paper
from ..llm.text_protocol import to_text_messages
from ..llm.messages import Message, ToolCall, with_object_arguments
from .extras import TrainError, report_to, require
from .cpu_memory import keep_freed_memory
from .models import FINAL, last_checkpoint, save_final
from .rft import without_nulls

TOOL_FORMATS = ("text", "native")


@dataclass
class SFTSettings:
    epochs: float = 3.0
    learning_rate: float = 1e-5
    batch_size: int = 1
    grad_accum: int = 1
    max_length: int | None = paper.CONTEXT_TOKENS
    save_steps: int = 50
    seed: int = 0
    tool_format: str = "native"
    keep_checkpoints: int = 3
    loggers: tuple[str, ...] = ("console",)  # extras.check_loggers


def text_protocol_messages(row: dict[str, Any]) -> list[dict[str, str]]:
    """An RFT row's conversation as plain turns in the agent's text protocol."""
    messages = []
    for m in without_nulls(row["messages"]):
        calls = [ToolCall(c.get("id", ""), c["function"]["name"], _arguments(c["function"].get("arguments")))
                 for c in m.get("tool_calls") or []]
        messages.append(Message(m["role"], m.get("content") or "", calls, m.get("tool_call_id"), m.get("name")))
    return [{"role": m.role, "content": m.content} for m in to_text_messages(messages, without_nulls(row["tools"]))]


def _arguments(value: Any) -> str:
    import json

    return value if isinstance(value, str) else json.dumps(value or {}, ensure_ascii=False)


def native_example(row: dict[str, Any]) -> dict[str, Any]:
    """A row for the model's own chat template: arguments as objects, as in rollouts."""
    return {"messages": with_object_arguments(without_nulls(row["messages"])), "tools": without_nulls(row["tools"])}


def sft_dataset(rows: list[dict[str, Any]], tool_format: str):
    datasets = require("datasets")
    if tool_format not in TOOL_FORMATS:
        raise TrainError(f"tool format must be one of {', '.join(TOOL_FORMATS)}, not {tool_format!r}")
    if not rows:
        raise TrainError("the RFT dataset is empty: no trajectory passed the filters; collect more, or see the "
                         "filter report")
    if tool_format == "text":
        return datasets.Dataset.from_list([{"messages": text_protocol_messages(r)} for r in rows])
    return datasets.Dataset.from_list([native_example(r) for r in rows])


def run_sft(model: str, rows: list[dict[str, Any]], out: Path, settings: SFTSettings, *, device: str = "cpu",
            callbacks: list | None = None) -> Path:
    """Fine-tune ``model`` on ``rows``; the result is saved to ``out/final``."""
    trl = require("trl")
    transformers = require("transformers")
    out = Path(out)
    final = out / FINAL
    if (final / "config.json").is_file():
        return final  # done by an earlier run
    dataset = sft_dataset(rows, settings.tool_format)
    if device == "cpu":
        keep_freed_memory()
    tokenizer = transformers.AutoTokenizer.from_pretrained(model)
    config = trl.SFTConfig(
        output_dir=str(out), num_train_epochs=settings.epochs, learning_rate=settings.learning_rate,
        per_device_train_batch_size=settings.batch_size, gradient_accumulation_steps=settings.grad_accum,
        max_length=settings.max_length, assistant_only_loss=True, use_cpu=device == "cpu",
        bf16=device != "cpu", gradient_checkpointing=device != "cpu",  # bf16 on a CPU is emulated: slow
        save_strategy="steps", save_steps=settings.save_steps, save_total_limit=settings.keep_checkpoints,
        logging_steps=1, report_to=report_to(settings.loggers), seed=settings.seed, lr_scheduler_type="constant", warmup_steps=0,
        dataloader_num_workers=0, disable_tqdm=True)
    trainer = trl.SFTTrainer(model=model, args=config, train_dataset=dataset, processing_class=tokenizer,
                             callbacks=callbacks or [])
    trainer.train(resume_from_checkpoint=last_checkpoint(out))
    return save_final(trainer, tokenizer, out)

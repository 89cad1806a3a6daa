"""verl's ``MultiTurnSFTDataset`` for RFT rows, with the nulls Parquet adds taken out again.

Parquet stores the list of tool schemas (and the tool calls) as one struct type, so every tool
reads back with every other tool's parameter names set to null; a chat template would show the
model those nulls. This subclass (``data.custom_cls`` in the rft stage) drops them after loading,
and turns the tool calls' arguments from JSON text back into objects.
"""

from __future__ import annotations

from verl.utils.dataset.multiturn_sft_dataset import MultiTurnSFTDataset

from cuda_agent.llm.messages import with_object_arguments
from cuda_agent.train.rft import without_nulls


class RFTDataset(MultiTurnSFTDataset):
    def _read_files_and_process(self) -> None:
        super()._read_files_and_process()
        if self.tools is not None:
            self.tools = [without_nulls(t) for t in self.tools]

    def _build_messages(self, example: dict) -> list:
        # tool-call arguments are JSON text in the rows; chat templates (Qwen's applies tojson) want
        # the object, as the verl loop renders it in rollouts, not the text encoded a second time
        return with_object_arguments(without_nulls(super()._build_messages(example)))

"""A tiny causal LM made here: a byte-level BPE tokenizer trained on the demo's own text and a
randomly initialised two-layer Llama (a model type
whose tokenizer transformers loads as saved, keeping the pre-tokenizer made here). Nothing is downloaded.

Its chat template is ChatML with ``{% generation %}`` markers around assistant turns, so TRL's
assistant-only loss knows which tokens the model wrote; ``<|im_end|>`` ends a turn and is the
end-of-sequence token the local client stops at.
"""

from __future__ import annotations

from pathlib import Path

CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\n' }}"
    "{%- if message['role'] == 'assistant' %}"
    "{% generation %}{{- message['content'] + '<|im_end|>' }}{% endgeneration %}{{- '\n' }}"
    "{%- else %}{{- message['content'] + '<|im_end|>\n' }}{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- endif %}"
)
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def build_tiny_model(directory: Path, corpus: list[str], *, vocab_size: int = 16384, max_token_chars: int = 128, hidden: int = 128,
                     layers: int = 2, heads: int = 4, positions: int = 8192, seed: int = 0) -> Path:
    """Train the tokenizer on ``corpus``, initialise the model, save both to ``directory``."""
    import torch
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    # Pieces end at line breaks (real ones, and the escaped ones inside JSON tool arguments), so a
    # merge can grow up to a line: prompts and replies become a few hundred tokens and training
    # fits in CI minutes on a CPU. Any text still encodes, byte by byte at worst.
    bpe.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(r"\\n|\n"), behavior="merged_with_previous"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL, max_token_length=max_token_chars,
                                                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                        bos_token=None, additional_special_tokens=["<|im_start|>"])
    tokenizer.chat_template = CHAT_TEMPLATE
    directory.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(directory)
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=2 * hidden,
                         num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=heads,
                         max_position_embeddings=positions, tie_word_embeddings=True,
                         eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
                         bos_token_id=None)
    model = LlamaForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(directory)
    return directory

"""Data synthesis: build CUDA-Agent-Ops-6K-like training tasks.

Seeds are crawled from torch and transformers (``seeds``, ``hf_seeds``), composed into
KernelBench-format tasks (``compose`` offline, ``llm_compose`` through a model), run through
execution-based filters (``probe`` measures, ``filters`` decides), checked against KernelBench and
each other (``similarity``), and written as a ``datasets``-loadable dataset with a card
(``dataset``, ``card``). ``synthesis`` runs it all, resumably and in parallel.
"""

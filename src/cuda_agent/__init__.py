"""cuda-agent: teach and use an LLM to turn a PyTorch program into a faster CUDA implementation,
judged by an evaluator hardened against the reward hacks listed in docs/security.md (which also
says what it does not catch)."""

__version__ = "0.1.0"

"""cuda-agent: teach and use an LLM to turn a PyTorch program into a faster CUDA implementation,
judged by an evaluator that a policy under RL pressure cannot fool."""

__version__ = "0.1.0"

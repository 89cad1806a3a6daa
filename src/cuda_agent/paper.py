"""The CUDA Agent paper's settings (arXiv 2602.24286), named once. Every default that follows
the paper (the agent loop, its environment, the context budget, the CLI, the verl and TRL
stages) reads them from here."""

from __future__ import annotations

CONTEXT_TOKENS = 131_072        # the agentic stages' context (§4.1)
SINGLE_TURN_CONTEXT_TOKENS = 32_768  # the single-turn warm-up's
TRAINING_TURNS = 150            # turns an episode may take in training (§4.1)
EVALUATION_TURNS = 200          # and at evaluation
AGENTIC_RL_STEPS = 150          # agentic RL's training steps (§4.1)

"""``cuda-agent train demo``: training that really learns, on the CPU, in minutes.

A tiny causal LM (random weights, a tokenizer trained here) is taught by rejection fine-tuning on
scripted expert trajectories, then by GRPO against the real CPU judge, on a family of tasks where
the judge's speed signal matters: each task has a slow correct kernel (reward 1) and a fast one
(reward 3). Every reward comes from the judge on code the model generated.
"""

"""KernelBench evaluation: problems, solutions, runs, metrics and reports."""

"""Pools of judge workers behind one interface: a local pool of processes on this machine."""

from .pool import JudgePool, LocalJudgePool

__all__ = ["JudgePool", "LocalJudgePool"]

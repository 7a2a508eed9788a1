"""Fused-operator tasks with executable references (the CUDA-Agent-Ops-6K seed card).

types (tensor types, steps) -> catalog (typed operators) -> grammar (composition with shape inference) -> render
(KernelBench-form source, task row) -> cost (unfused / fused work) -> similarity
(KernelBench contamination) -> dataset (files, stats, card) -> filter / execute (PyTorch).
Everything but execute runs on the standard library.
"""
from .cost import fused_cost, roofline_ms

__all__ = ["fused_cost", "roofline_ms"]

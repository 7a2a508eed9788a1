"""Exports of a dataset into the formats of other tools (KernelBench)."""
from .kernelbench import export_kernelbench

__all__ = ["export_kernelbench"]

"""pytest-xlatune: XLA/NCCL flag tuning of LLM training cells as pytest items."""

__version__ = "0.1.0"

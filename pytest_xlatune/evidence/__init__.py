"""Evidence from a run: compiled HLO text, profile summaries."""

from __future__ import annotations

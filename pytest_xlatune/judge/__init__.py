"""Judging runs (pure): log parsing, failure signatures, triage, playbook, hang, stats, verdicts, lock."""

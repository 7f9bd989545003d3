"""The maxtext-slurm backend: its launcher, the TUNE_PROFILE blocks, checkout checks and job files."""

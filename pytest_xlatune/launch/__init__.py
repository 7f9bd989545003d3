"""Launchers turn a JobRequest into a running job: local process, sbatch script, maxtext-slurm."""

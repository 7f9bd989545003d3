"""How did the job end, and what now (pure): step lines, logs, failure signatures, hang, diagnosis, playbook."""

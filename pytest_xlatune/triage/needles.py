"""The byte needles StepLog searches each block of a log for: pure data, kept beside the
signatures (signatures.py) whose lines they must find."""

from __future__ import annotations

# Byte needles for StepLog: every streamed signature's lines hold one of these or of logs.OOM_NEEDLES
# (tests/unit/triage/test_logs_real.py).
EVIDENCE_NEEDLES: tuple[bytes, ...] = (
    # None occurs in a known-noise line, so noise costs no per-line work; each needle is one
    # memmem pass per block, so there are as few as the streamed signatures allow (StepLog also
    # passes every OOM-needle line through them). Other signatures' lines reach triage by the tail.
    b"Error",
    b"Exception:",
    b"imeout",
    b"imed out",
    b"DEADLINE_EXCEEDED",
    b"eartbeat",
    b"have crashed",
    b"coordination service",
    b"HSA_STATUS_ERROR",
    b"CUDA_ERROR_",
    b"cuMemAllocAsync",
    b"cqe with",
    b"Node failure",
    b"ptxas",
    b"] Check failed: ",
    b"ailed to compile",
    b"compiling fusion",
    b"LLVM",
    b"completion from peer",
    b"port error",
    b"catastrophic error",
    b"stuck",
    b"CANCELLED AT",
    b"Unknown ",
    b"interpret value",
    b") failed",
    b"NCCL error",
    b"access fault",
    b"illegal memory",
    b"ncorrectable",
    b"NVRM: ",
    b"GPU reset",
    b"SLICE_FAILURE_",
    b"visible GPU",
    b"cudnn handle",
    b"DNN library",
    b"fatal error occurred",
    b" failure '",
    b"oom",
    b"Out Of Memory",  # `oom-kill`, `oom_kill`: one needle, one pass
    b"memory limit",
    b"srun: error:",
    b"Fatal Python error",
    b"(core dumped)",
    b"Segmentation fault",
    b"connect to all",
    b"incarnation",
    b"o space left",
)

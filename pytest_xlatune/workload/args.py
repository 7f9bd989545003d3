"""Parse MaxText-style ``key=value`` arguments into a frozen Config (no jax import here)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, fields

from ..errors import XlatuneError


class ArgError(XlatuneError, ValueError):
    """A bad command-line argument; the message is one line, printed as is."""


@dataclass(frozen=True)
class Config:
    """Every key the workload understands, with MaxText's names and the toy model's defaults.

    Pipeline shape: ``stages = dcn_pipeline_parallelism * ici_pipeline_parallelism``;
    ``num_layers_per_pipeline_stage`` (K) is the number of consecutive layers one stage runs
    per pass; ``V = num_decoder_layers / (stages * K)`` is the number of passes (virtual
    stages, MaxText's ``num_pipeline_repeats``). K defaults to ``num_decoder_layers / stages``
    (V = 1, plain GPipe); V > 1 is a circular pipeline and needs ``microbatches >= stages``.
    Bubble fraction = ``(stages - 1) / (microbatches * V + stages - 1)``.
    """

    steps: int = 15
    per_device_batch_size: float = 2.0
    max_target_length: int = 128
    emb_dim: int = 128
    mlp_dim: int = 512
    num_decoder_layers: int = 4
    num_heads: int = 8
    vocab_size: int = 1024
    learning_rate: float = 3e-3
    seed: int = 0
    dataset_type: str = "synthetic"
    dcn_data_parallelism: int = 1
    ici_data_parallelism: int = 1
    dcn_fsdp_parallelism: int = 1
    ici_fsdp_parallelism: int = 1
    dcn_pipeline_parallelism: int = 1
    ici_pipeline_parallelism: int = 1
    dcn_tensor_parallelism: int = 1
    ici_tensor_parallelism: int = 1
    num_pipeline_microbatches: int = -1  # -1: one per stage
    num_layers_per_pipeline_stage: int = -1  # -1: num_decoder_layers / stages
    pipeline_fsdp_ag_once: bool = False
    profiler: str = ""
    skip_first_n_steps_for_profiler: int = 5
    profiler_steps: int = 4
    base_output_directory: str = "."
    run_name: str = "xlatune_workload"
    jax_distributed_heartbeat_timeout_seconds: int = 100  # accepted for parity; unused
    # MaxText's key: set, it names JAX's compilation cache over JAX_COMPILATION_CACHE_DIR, as
    # MaxText's pyconfig does (MaxText's default is ~/jax_cache; here none).
    jax_cache_dir: str = ""
    fault: str = ""
    # MaxText's activation/compute dtype (weights and optimizer state stay float32, like
    # MaxText's weight_dtype): bfloat16 really changes the loss trajectory.
    dtype: str = "float32"
    # MaxText's key for the platform: cpu (the default here: virtual host devices), gpu (the
    # CUDA GPUs of this machine, jax[cuda] needed) or auto (the GPUs when jax finds some, else cpu).
    jax_platform: str = "cpu"  # not MaxText's `hardware` (its gpu.yml configs say gpu on any machine)
    ignored: tuple[str, ...] = field(default=(), compare=False)

    # Derived sizes -------------------------------------------------------------------------
    @property
    def data(self) -> int:
        return self.dcn_data_parallelism * self.ici_data_parallelism

    @property
    def fsdp(self) -> int:
        return self.dcn_fsdp_parallelism * self.ici_fsdp_parallelism

    @property
    def stages(self) -> int:
        return self.dcn_pipeline_parallelism * self.ici_pipeline_parallelism

    @property
    def tensor(self) -> int:
        return self.dcn_tensor_parallelism * self.ici_tensor_parallelism

    @property
    def num_devices(self) -> int:
        return self.data * self.fsdp * self.stages * self.tensor

    @property
    def global_batch(self) -> int:
        return round(self.per_device_batch_size * self.num_devices)

    @property
    def microbatches(self) -> int:
        if self.num_pipeline_microbatches > 0:
            return self.num_pipeline_microbatches
        return self.stages

    @property
    def layers_per_stage(self) -> int:
        if self.num_layers_per_pipeline_stage > 0:
            return self.num_layers_per_pipeline_stage
        return self.num_decoder_layers // self.stages

    @property
    def repeats(self) -> int:
        """V: how many times each microbatch goes round the pipeline."""
        return self.num_decoder_layers // (self.stages * self.layers_per_stage)

    @property
    def bubble_fraction(self) -> float:
        if self.stages == 1:
            return 0.0
        return (self.stages - 1) / (self.microbatches * self.repeats + self.stages - 1)


_FIELDS = {f.name: f for f in fields(Config) if f.name != "ignored"}
_PROFILERS = ("", "xplane")
_DTYPES = ("float32", "bfloat16")
HARDWARE = ("cpu", "gpu", "auto")
_FAULTS = (
    "",
    "oom",
    "hang_before_step0",
    "hang_after_step0",
    "sigterm_after_last",
    "coord_timeout",
    "rccl_flake",
)


def _convert(key: str, raw: str, default: object) -> object:
    value = raw.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        value = value[1:-1]  # profiler="" survives some shells with its quotes
    if isinstance(default, str):
        return value
    if isinstance(default, bool):
        if value.lower() in ("true", "1"):
            return True
        if value.lower() in ("false", "0"):
            return False
        raise ArgError(f"{key}={raw!s} is not true or false")
    try:
        if isinstance(default, int):
            return int(value)
        return float(value)
    except ValueError:
        kind = "an integer" if isinstance(default, int) else "a number"
        raise ArgError(f"{key}={raw!s} is not {kind}") from None


def parse_args(argv: Sequence[str]) -> Config:
    """Turn ``key=value`` words into a validated Config; raise ArgError on anything else."""
    cfg = read_args(argv)
    _validate(cfg)
    return cfg


def read_args(argv: Sequence[str]) -> Config:
    """Turn ``key=value`` words into a Config, not yet validated; raise ArgError on a bad word."""
    values: dict[str, object] = {}
    ignored: list[str] = []
    for word in argv:
        key, sep, raw = word.partition("=")
        if not sep or not key or key.startswith("-") or not key.replace("_", "a").isalnum():
            raise ArgError(f"expected key=value, got {word!r}")
        if key not in _FIELDS:
            ignored.append(word)
            continue
        values[key] = _convert(key, raw, _FIELDS[key].default)
    return dataclasses.replace(Config(), ignored=tuple(ignored), **values)  # type: ignore[arg-type]


def _need(ok: bool, message: str) -> None:
    if not ok:
        raise ArgError(message)


def _validate(c: Config) -> None:
    """Reject configs the toy model cannot shard, with MaxText-like wording."""
    positive = (
        "steps", "max_target_length", "emb_dim", "mlp_dim", "num_decoder_layers", "num_heads",
        "vocab_size", "dcn_data_parallelism", "ici_data_parallelism", "dcn_fsdp_parallelism",
        "ici_fsdp_parallelism", "dcn_pipeline_parallelism", "ici_pipeline_parallelism",
        "dcn_tensor_parallelism", "ici_tensor_parallelism", "profiler_steps",
    )  # fmt: skip
    for key in positive:
        _need(getattr(c, key) > 0, f"{key} must be positive, got {getattr(c, key)}")
    _need(c.skip_first_n_steps_for_profiler >= 0, "skip_first_n_steps_for_profiler must be >= 0")
    _need(c.per_device_batch_size > 0, "per_device_batch_size must be positive")
    _need(c.learning_rate > 0, "learning_rate must be positive")
    _need(c.dataset_type == "synthetic", f"dataset_type={c.dataset_type!r}: only 'synthetic' is supported")
    _need(c.profiler in _PROFILERS, f"profiler={c.profiler!r}: expected '' or 'xplane'")
    _need(c.dtype in _DTYPES, f"dtype={c.dtype!r}: expected one of {', '.join(_DTYPES)}")
    _need(c.jax_platform in HARDWARE, f"jax_platform={c.jax_platform!r}: expected one of {', '.join(HARDWARE)}")
    _need(c.fault in _FAULTS, f"fault={c.fault!r}: expected one of {', '.join(f for f in _FAULTS if f)}")
    _need(c.num_devices <= 512, f"{c.num_devices} devices is too many for a CPU run")
    _need(
        math.isclose(c.per_device_batch_size * c.num_devices, c.global_batch),
        f"per_device_batch_size={c.per_device_batch_size} x {c.num_devices} devices is not a whole batch",
    )
    _need(c.emb_dim % c.num_heads == 0, f"emb_dim={c.emb_dim} is not divisible by num_heads={c.num_heads}")
    _need(c.emb_dim % c.fsdp == 0, f"emb_dim={c.emb_dim} is not divisible by fsdp parallelism {c.fsdp}")
    for key in ("num_heads", "mlp_dim", "vocab_size"):
        size = getattr(c, key)
        _need(size % c.tensor == 0, f"{key}={size} is not divisible by tensor parallelism {c.tensor}")
    batch, inner = c.global_batch, c.data * c.fsdp
    outer = inner * c.stages
    _need(batch % outer == 0, f"global batch {batch} is not divisible by data*stage*fsdp={outer}")
    if c.stages == 1:
        return  # num_pipeline_microbatches & co. are ignored without a pipeline, as in MaxText
    layers, per = c.num_decoder_layers, c.stages * c.layers_per_stage
    _need(layers % c.stages == 0, f"num_decoder_layers={layers} is not divisible by {c.stages} pipeline stages")
    _need(layers % per == 0, f"num_decoder_layers={layers} is not divisible by stages*layers_per_stage={per}")
    problem = microbatch_problem(c)
    _need(problem is None, problem or "")


def microbatch_problem(c: Config) -> str | None:
    """Why the pipeline's microbatch count does not fit the batch (None: it fits)."""
    batch, inner = c.global_batch, c.data * c.fsdp
    if batch % c.microbatches:
        return f"global batch {batch} is not divisible by {c.microbatches} microbatches"
    if (batch // c.microbatches) % inner:
        return f"microbatch size {batch // c.microbatches} is not divisible by data*fsdp={inner}"
    if c.repeats > 1 and c.microbatches < c.stages:
        return f"a circular pipeline (V={c.repeats}) needs num_pipeline_microbatches >= {c.stages} stages"
    return None


def fitting_microbatches(c: Config) -> tuple[int, ...]:
    """Every microbatch count the pipeline of `c` accepts (each a divisor of the global batch)."""
    batch = c.global_batch
    candidates = (m for m in range(1, batch + 1) if batch % m == 0)
    return tuple(
        m for m in candidates if microbatch_problem(dataclasses.replace(c, num_pipeline_microbatches=m)) is None
    )

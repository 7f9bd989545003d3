"""The training loop: MaxText-like log lines, one jitted ``train_step`` per step, xplane trace."""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ..evidence.inert import COMPILED_LINE
from . import model, parallel
from .args import Config
from .faults import Point, fire

State = dict[str, Any]
B1, B2, EPS = 0.9, 0.95, 1e-8


def _adam(state: State, grads: model.Params, lr: float) -> State:
    """Adam with bias correction; moments live with (and are sharded like) the params."""
    step = state["step"] + 1
    mu = jax.tree.map(lambda m, g: B1 * m + (1 - B1) * g, state["mu"], grads)
    nu = jax.tree.map(lambda v, g: B2 * v + (1 - B2) * g * g, state["nu"], grads)
    t = step.astype(jnp.float32)
    scale = lr * jnp.sqrt(1 - B2**t) / (1 - B1**t)
    params = jax.tree.map(lambda p, m, v: p - scale * m / (jnp.sqrt(v) + EPS), state["params"], mu, nu)
    return {"params": params, "mu": mu, "nu": nu, "step": step}


def build(c: Config) -> tuple[Any, Any, Any]:
    """Return (init_state, train_step, order) for a fresh mesh; train_step is jitted with explicit shardings."""
    mesh = parallel.make_mesh(c)
    pspecs = parallel.param_specs(c)
    state_specs = {"params": pspecs, "mu": pspecs, "nu": pspecs, "step": jax.sharding.PartitionSpec()}
    state_sh = parallel.shardings(mesh, state_specs)
    replicated = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
    order = jax.device_put(model.token_cycle(c), replicated)
    tokens_sh = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(parallel.BATCH, None))

    def init_state() -> State:
        params = model.init_params(c, parallel.layer_lead(c))
        mu, nu = jax.tree.map(np.zeros_like, params), jax.tree.map(np.zeros_like, params)
        host = {"params": params, "mu": mu, "nu": nu, "step": np.int32(0)}
        return jax.device_put(host, state_sh)  # type: ignore[no-any-return]

    def loss_fn(params: model.Params, inputs: jax.Array, targets: jax.Array) -> jax.Array:
        x = params["embed"][inputs].astype(c.dtype)
        x = parallel.decoder(c, mesh, params["layers"], x)
        return model.logits_loss(params, x, targets)

    def train_step(state: State, order: jax.Array) -> tuple[State, jax.Array]:
        inputs, targets = model.synthetic_batch(c, order, state["step"])
        inputs = jax.lax.with_sharding_constraint(inputs, tokens_sh)
        targets = jax.lax.with_sharding_constraint(targets, tokens_sh)
        loss, grads = jax.value_and_grad(loss_fn)(state["params"], inputs, targets)
        return _adam(state, grads, c.learning_rate), loss

    # The function name makes the HLO module jit_train_step in dumps (module_*.jit_train_step.*).
    step = jax.jit(
        train_step,
        in_shardings=(state_sh, replicated),
        out_shardings=(state_sh, replicated),
        donate_argnums=0,
    )
    return init_state, step, order


def _print_header(c: Config) -> None:
    for f in dataclasses.fields(c):
        if f.name != "ignored":
            print(f"Config param {f.name}: {getattr(c, f.name)}")
    jaxlib_version = getattr(sys.modules.get("jaxlib"), "__version__", "unknown")  # jax imports jaxlib first
    print(f"System Information: Jax Version: {jax.__version__}, Jaxlib Version: {jaxlib_version}")
    shape = (c.data, c.stages, c.fsdp, c.tensor)
    print(f"Num_devices: {jax.device_count()}, shape {shape}, mesh axes {parallel.AXES}")
    if c.stages > 1:
        print(
            f"Pipeline: stages={c.stages} microbatches={c.microbatches} layers_per_stage={c.layers_per_stage} "
            f"repeats={c.repeats} bubble_fraction={c.bubble_fraction:.3f}"
        )
    print(f"number parameters: {model.num_params(c) / 1e9:.6f} billion", flush=True)


def _memstats(state: State) -> None:
    """Print MaxText's 'Memstats' block: bytes resident on the first device, of its memory."""
    dev = jax.devices()[0]
    used = sum(s.data.nbytes for leaf in jax.tree.leaves(state) for s in leaf.addressable_shards if s.device == dev)
    stats = dev.memory_stats() if dev.platform != "cpu" else None  # a GPU's allocator knows both
    if stats and stats.get("bytes_limit"):
        used, total = int(stats.get("bytes_in_use", used)), int(stats["bytes_limit"])
    else:
        try:
            total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError):
            total = 1 << 36
    print("Memstats: After params initialized:")
    print(f"\tUsing (GB) {used / 1e9:.2f} / {total / 1e9:.2f} ({100 * used / total:.6f}%) on {dev}", flush=True)


def run(c: Config) -> int:
    """Train for ``c.steps`` steps, printing one MaxText step line per step."""
    try:
        count = jax.device_count()
    except (RuntimeError, AssertionError) as error:  # JAX_PLATFORMS=cuda without a CUDA jax or GPU
        print(
            f"error: jax_platform={c.jax_platform}: jax cannot start its backend (no GPU, or jax without CUDA: "
            f"pip install 'jax[cuda12]'): {type(error).__name__}: {error}".rstrip(": "),
            file=sys.stderr,
        )
        return 1
    if count < c.num_devices:
        print(f"error: need {c.num_devices} devices, jax sees {count}", file=sys.stderr)
        return 1
    if c.jax_cache_dir:  # before the first compile, as MaxText's pyconfig does
        jax.config.update("jax_compilation_cache_dir", os.path.expanduser(c.jax_cache_dir))
    _print_header(c)
    fire(c.fault, Point.INIT)
    init, step_fn, order = build(c)
    state = init()
    jax.block_until_ready(state)
    _memstats(state)
    fire(c.fault, Point.AFTER_MEMSTATS)
    # Compiled before step 0 and said so: the tool fingerprints the program XLA dumped
    # (evidence/fingerprint.py) as soon as this line appears, before any training step.
    compile_start = time.perf_counter()
    train_step = step_fn.lower(state, order).compile()
    print(f"{COMPILED_LINE} ({time.perf_counter() - compile_start:.3f} s)", flush=True)

    trace_dir = os.path.join(c.base_output_directory, c.run_name, "tensorboard")
    first, last = c.skip_first_n_steps_for_profiler, c.skip_first_n_steps_for_profiler + c.profiler_steps
    tracing = False
    devices, tokens = jax.device_count(), c.global_batch * c.max_target_length
    flops = model.flops_per_step(c)
    for step in range(c.steps):
        if c.profiler == "xplane" and step == first:
            jax.profiler.start_trace(trace_dir, create_perfetto_trace=True)
            tracing = True
        start = time.perf_counter()
        state, loss = train_step(state, order)
        loss_value = float(loss)  # blocks: the step time covers the whole step
        seconds = time.perf_counter() - start
        if tracing and step == last - 1:
            jax.profiler.stop_trace()
            tracing = False
        print(
            f"completed step: {step}, seconds: {seconds:.3f}, "
            f"TFLOP/s/device: {flops / devices / seconds / 1e12:.3f}, "
            f"Tokens/s/device: {tokens / devices / seconds:.3f}, "
            f"total_weights: {tokens}, loss: {loss_value:.3f}",
            flush=True,
        )
        fire(c.fault, Point.AFTER_STEP, step)
    if tracing:
        jax.profiler.stop_trace()
    fire(c.fault, Point.AFTER_LAST)
    return 0

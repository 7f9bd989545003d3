"""Device mesh, weight shardings and the microbatched (optionally circular) pipeline."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import AxisType, Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from . import model
from .args import Config

AXES = ("data", "stage", "fsdp", "tensor")
# Outside the pipeline the batch is split over every non-tensor axis, so pipeline stages do
# not all repeat the embedding and the loss; inside it a microbatch is split over data x fsdp.
BATCH = ("data", "stage", "fsdp")
MICROBATCH = ("data", "fsdp")


def make_mesh(c: Config) -> Mesh:
    """One mesh axis per parallelism kind; dcn and ici sizes multiply (all devices are local)."""
    shape = (c.data, c.stages, c.fsdp, c.tensor)
    devices = np.array(jax.devices()[: c.num_devices]).reshape(shape)
    return Mesh(devices, AXES, axis_types=(AxisType.Auto,) * len(AXES))


def layer_lead(c: Config) -> tuple[int, ...]:
    """Leading dims of stacked layer weights: (L,) or, pipelined, (V, stages, K)."""
    if c.stages == 1:
        return (c.num_decoder_layers,)
    return (c.repeats, c.stages, c.layers_per_stage)


def param_specs(c: Config) -> dict[str, Any]:
    """PartitionSpecs matching init_params' tree."""
    lead: tuple[str | None, ...] = (None,) if c.stages == 1 else (None, "stage", None)
    layers = {k: P(*lead, *spec) for k, spec in model.LAYER_SPECS.items()}
    return {**model.TOP_SPECS, "layers": layers}


def shardings(mesh: Mesh, specs: Any) -> Any:
    """Turn a tree of PartitionSpecs into NamedShardings on ``mesh``."""
    return jax.tree.map(lambda s: NamedSharding(mesh, s), specs, is_leaf=lambda s: isinstance(s, P))


def decoder(c: Config, mesh: Mesh, layers: model.Params, x: jax.Array) -> jax.Array:
    """All decoder layers on activations ``x`` [batch, seq, emb], pipelined if stages > 1."""
    act = NamedSharding(mesh, P(BATCH, None, None))
    x = jax.lax.with_sharding_constraint(x, act)
    if c.stages == 1:
        return model.apply_layers(x, layers)
    b, s, e = x.shape
    m = c.microbatches
    mb = b // m
    # Microbatch i holds rows i, i+m, i+2m...: the sharded batch dim stays major, no all-to-all.
    xm = x.reshape(mb, m, s, e).swapaxes(0, 1)
    xm = jax.lax.with_sharding_constraint(xm, NamedSharding(mesh, P(None, MICROBATCH, None, None)))
    if c.pipeline_fsdp_ag_once:  # MaxText's knob: all-gather stage weights once, not per iteration
        gathered = {
            k: P(None, "stage", None, *(None if a == "fsdp" else a for a in spec))
            for k, spec in model.LAYER_SPECS.items()
        }
        layers = jax.lax.with_sharding_constraint(layers, shardings(mesh, gathered))
    run: Callable[..., jax.Array] = jax.shard_map(
        lambda lw, xs: _pipeline(c, lw, xs),
        mesh=mesh,
        in_specs=(P(None, "stage"), P()),
        out_specs=P(),
        axis_names=frozenset({"stage"}),
    )
    out = run(layers, xm)
    spread: jax.Array = jax.lax.with_sharding_constraint(out.swapaxes(0, 1).reshape(b, s, e), act)
    return spread


def _pipeline(c: Config, layers: model.Params, xs: jax.Array) -> jax.Array:
    """GPipe/circular schedule on one stage: xs [M, mb, S, E] -> outputs of the last stage.

    At iteration t, stage s works on microbatch (t - s) mod M in pass (t - s) // M; outputs
    move to the next stage with a ring collective-permute, and (only when V > 1) stage 0
    keeps what the last stage sent in a buffer, for that microbatch's next pass. Idle
    (bubble) slots compute on garbage, as an SPMD pipeline does: M * V + stages - 1
    iterations in total. The last M iterations of the last stage are the final pass.
    """
    n, m, v = c.stages, c.microbatches, c.repeats
    iterations = m * v + n - 1
    stage = jax.lax.axis_index("stage")
    weights = jax.tree.map(lambda a: a[:, 0], layers)  # [V, K, ...] on this stage
    ring = [(i, (i + 1) % n) for i in range(n)]
    # Read the (stage-invariant) inputs as per-stage values once, so the backward pass sums
    # their cotangents over stages once, not with an all-reduce in every iteration.
    xs = jax.lax.pcast(xs, ("stage",), to="varying")

    def body(carry: tuple[jax.Array, jax.Array], t: jax.Array) -> tuple[tuple[jax.Array, jax.Array], jax.Array]:
        state, circ = carry
        m_in = t % m
        if v == 1:
            first, w = xs[m_in], jax.tree.map(lambda a: a[0], weights)
        else:
            first = jnp.where(t < m, xs[m_in], circ[m_in])
            rep = jnp.clip((t - stage) // m, 0, v - 1)
            w = jax.tree.map(lambda a: jax.lax.dynamic_index_in_dim(a, rep, keepdims=False), weights)
        y = model.apply_layers(jnp.where(stage == 0, first, state), w)
        nxt = jax.lax.ppermute(y, "stage", ring)
        if v > 1:  # only stage 0 reads circ; slot j is rewritten only after it was read
            circ = circ.at[(t - (n - 1)) % m].set(nxt)
        return (nxt, circ), y

    circ = jnp.zeros_like(xs) if v > 1 else jnp.zeros((), xs.dtype)
    _, ys = jax.lax.scan(body, (jnp.zeros_like(xs[0]), circ), jnp.arange(iterations))
    out = jnp.where(stage == n - 1, ys[iterations - m :], 0.0)
    summed: jax.Array = jax.lax.psum(out, "stage")  # only the last stage contributes
    return summed

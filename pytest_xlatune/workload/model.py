"""A small decoder-only transformer LM and its synthetic, learnable data."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec as P

from .args import Config

Params = dict[str, Any]

# Mesh axis for each logical dimension (MaxText's logical_axis_rules, reduced):
# weights shard their embed dimension over fsdp and heads/mlp/vocab over tensor.
LAYER_SPECS = {
    "ln1": P(None),
    "wq": P("fsdp", "tensor", None),
    "wk": P("fsdp", "tensor", None),
    "wv": P("fsdp", "tensor", None),
    "wo": P("tensor", None, "fsdp"),
    "ln2": P(None),
    "wi": P("fsdp", "tensor"),
    "wo2": P("tensor", "fsdp"),
}
TOP_SPECS = {"embed": P("tensor", "fsdp"), "ln_f": P(None), "unembed": P("fsdp", "tensor")}


def layer_shapes(c: Config) -> dict[str, tuple[int, ...]]:
    """Shapes of one decoder layer's weights."""
    e, h, m = c.emb_dim, c.num_heads, c.mlp_dim
    d = e // h
    return {
        "ln1": (e,),
        "wq": (e, h, d),
        "wk": (e, h, d),
        "wv": (e, h, d),
        "wo": (h, d, e),
        "ln2": (e,),
        "wi": (e, m),
        "wo2": (m, e),
    }


def num_params(c: Config) -> int:
    per_layer = sum(int(np.prod(s)) for s in layer_shapes(c).values())
    return c.num_decoder_layers * per_layer + 2 * c.vocab_size * c.emb_dim + c.emb_dim


def flops_per_step(c: Config) -> float:
    """Training FLOPs per step: 6 * params * tokens plus causal attention (MaxText's estimate)."""
    tokens = c.global_batch * c.max_target_length
    attention = 6 * c.num_decoder_layers * c.global_batch * c.max_target_length**2 * c.emb_dim
    return 6.0 * num_params(c) * tokens + attention


def init_params(c: Config, layer_lead: tuple[int, ...]) -> dict[str, Any]:
    """Random weights as host numpy arrays (no compile); layers stacked on dims ``layer_lead``.

    The values depend only on the seed and the layer order, not on ``layer_lead``, so a
    pipelined run starts from the same model as an FSDP run.
    """
    rng = np.random.default_rng(c.seed)

    def normal(shape: tuple[int, ...], scale: float) -> np.ndarray:
        drawn: np.ndarray = (rng.standard_normal(shape, dtype=np.float32) * np.float32(scale)).astype(np.float32)
        return drawn

    layers: dict[str, np.ndarray] = {}
    for name, shape in layer_shapes(c).items():
        full = layer_lead + shape
        if name.startswith("ln"):
            layers[name] = np.ones(full, np.float32)
        else:
            fan_in = shape[0] if name != "wo" else shape[0] * shape[1]
            layers[name] = normal(full, fan_in**-0.5)
    return {
        "embed": normal((c.vocab_size, c.emb_dim), 1.0),
        "layers": layers,
        "ln_f": np.ones((c.emb_dim,), np.float32),
        "unembed": normal((c.emb_dim, c.vocab_size), c.emb_dim**-0.5),
    }


def _rmsnorm(x: jax.Array, scale: jax.Array) -> jax.Array:
    return x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6) * scale


def decoder_layer(x: jax.Array, p: Params) -> jax.Array:
    """One pre-norm block: causal multi-head attention, then a GELU MLP."""
    s = x.shape[1]
    p = jax.tree.map(lambda w: w.astype(x.dtype), p)  # compute in the activation dtype
    h = _rmsnorm(x, p["ln1"])
    q = jnp.einsum("bse,ehd->bhsd", h, p["wq"])
    k = jnp.einsum("bse,ehd->bhsd", h, p["wk"])
    v = jnp.einsum("bse,ehd->bhsd", h, p["wv"])
    scores = jnp.einsum("bhqd,bhkd->bhqk", q, k) * q.shape[-1] ** -0.5
    causal = jnp.tril(jnp.ones((s, s), jnp.bool_))
    scores = jnp.where(causal, scores, -1e9)
    attn = jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(scores, axis=-1), v)
    x = x + jnp.einsum("bhsd,hde->bse", attn, p["wo"])
    h = _rmsnorm(x, p["ln2"])
    out: jax.Array = x + jax.nn.gelu(h @ p["wi"]) @ p["wo2"]
    return out


def apply_layers(x: jax.Array, layers: Params) -> jax.Array:
    """Run the stacked layers (leading dim) in order with a scan, like MaxText's scan_layers."""

    def body(carry: jax.Array, p: Params) -> tuple[jax.Array, None]:
        return decoder_layer(carry, p), None

    out, _ = jax.lax.scan(body, x, layers)
    return out


def logits_loss(params: Params, x: jax.Array, targets: jax.Array) -> jax.Array:
    """Mean next-token cross-entropy from final hidden states."""
    x = x.astype(jnp.float32)  # the loss in float32 whatever the activation dtype (as MaxText)
    logits = _rmsnorm(x, params["ln_f"]) @ params["unembed"]
    logp = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
    picked = jnp.take_along_axis(logp, targets[..., None], axis=-1)[..., 0]
    return -jnp.mean(picked)


def synthetic_batch(c: Config, order: jax.Array, step: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Walks along one fixed random cycle of a small token subset: a learnable bigram language.

    Only ``len(order)`` tokens occur (the unigram drop comes first), and each token has one
    successor, so a 15-step run shows a clear loss decrease.
    """
    key = jax.random.fold_in(jax.random.key(c.seed + 1), step)
    n = order.shape[0]
    start = jax.random.randint(key, (c.global_batch, 1), 0, n)
    pos = (start + jnp.arange(c.max_target_length + 1)[None, :]) % n
    seq = order[pos]
    return seq[:, :-1], seq[:, 1:]


def token_cycle(c: Config) -> np.ndarray:
    """The fixed cycle of tokens the synthetic data walks (a quarter of the vocab, at most 256)."""
    n = max(2, min(256, c.vocab_size // 4))
    rng = np.random.default_rng(c.seed)
    return rng.permutation(c.vocab_size)[:n].astype(np.int32)

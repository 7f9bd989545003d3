"""The replay simulator's clusters: seeded sweeps with known true effects, drift and job timelines.

Calibrated against ../shared/reference/example-report-pp-vs-fsdp-deepseek3-671b.md (DeepSeek-V3
671B, 8 nodes × 8 MI355, FSDP=8 and PP=8 sweeps of 25-28 profiles): baseline 1017.7 TGS at
28.2 s per step; winners come as a lever with variants (the all-gather threshold: +11.6, +11.55,
+10.7, +10.0, +7.9, +6.3 %), negatives from −1.3 to −6 % and a few far worse (remat −13 %),
a few OOMs and an unknown flag; step-to-step jitter ≈ 0.7 % (≈ 7 TGS of 967); a job ≈ 12 min
(init and compile ≈ 5 min, then 15 steps). The drift is a random walk plus rare steps (another
tenant, a firmware roll), of the size the issue quotes for real clusters.

Each candidate also has a compiled program (`Sweep.programs`): a share `World.inert_share` of
the exact no-ops compile to the baseline's program (a flag set to its image default, a pass that
does not fire on this model: the report's `pipelined_p2p=true` on FSDP=8, `cp_decomp_1G` on PP=8
with 392 MiB collective-permutes); every other candidate, no-op or not, compiles to a program of
its own (a runtime setting such as an NCCL variable, or a program change that does not move the
speed). The adaptive sweep cuts the former after its compile, as the engine does (engine/inert.py).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from pathlib import Path

from pytest_xlatune.adaptive import Plan, PlanItem, Role
from pytest_xlatune.adaptive.keys import plan_items
from pytest_xlatune.cell.values import Backend, BackendKind, Cell, ClusterSlot, EnvFileEntry, Parallelism
from pytest_xlatune.plan.expand import RunKind, RunSpec

STEPS, WARMUP = 15, 5
COMPILE_S = (150.0, 270.0)  # with init: ≈ 4.6 min, so a job ≈ 12 min
# A run of settings already run loads their executable from the compilation cache the tool gives
# each settings (pytest_xlatune/adaptive/cache.py; adaptive sweeps only, never an evidence run).
# `python bench/compile_cache.py` measured its compile phase at 0.25 of a compiling run's on
# the demo's baseline settings (0.18 at -O2; same run, 2026-12-03): the same share here.
CACHED_COMPILE_RATIO = 0.25
ENV_FLAG, ENV_DEPLOYED, ENV_DEFAULT = "--xla_gpu_sim_deployed", "0", "2"


@dataclass(frozen=True)
class World:
    """The simulated cluster's parameters (every figure is per sweep unless said otherwise)."""

    noise_pct: float = 0.8  # run-to-run CV of a run's steady mean
    step_scatter_pct: float = 0.7  # step-to-step scatter inside a job (AR(1))
    step_autocorr: float = 0.3
    walk_pct_per_sqrt_h: float = 0.35  # random-walk drift
    jump_rate_per_h: float = 0.08  # drift steps (±1-3 %)
    jump_pct: tuple[float, float] = (1.0, 3.0)
    base_tgs: float = 1017.7
    base_step_s: float = 28.2
    init_s: tuple[float, float] = (45.0, 90.0)
    compile_s: tuple[float, float] = COMPILE_S
    cached_compile_s: tuple[float, float] = (COMPILE_S[0] * CACHED_COMPILE_RATIO, COMPILE_S[1] * CACHED_COMPILE_RATIO)
    queue_wait_mean_s: float = 45.0
    teardown_s: float = 15.0
    cancel_s: float = 10.0
    profiler_overhead_s: float = 60.0
    nodes: int = 8
    profiles: tuple[int, int] = (22, 34)
    # Stressors (issue 23): every profile a no-op; candidates' runs with their own, larger noise
    # (unstable profiles on a steady baseline); a co-tenant that slows every step of every run by
    # burst_pct in a window of burst_h hours every burst_every_h hours.
    all_null: bool = False
    profile_noise_pct: float | None = None
    burst_pct: float = 0.0
    burst_h: float = 1.0
    burst_every_h: float = 3.0
    # Of the exact no-op candidates, the share whose compiled program is the baseline's (the
    # report's no-ops: half are compile-level, half runtime settings or programs that changed).
    inert_share: float = 0.5


@dataclass(frozen=True)
class Job:
    """One simulated job's timeline, fixed when it is submitted."""

    start: float
    step_ends: tuple[float, ...]
    tgs: tuple[float, ...]
    steady_from: int
    end: float
    failure: str = ""
    compiled: float = 0.0  # when the job said its train step is compiled (0: it never did)


@dataclass(frozen=True)
class Sweep:
    """A seeded sweep: the plan, each item's true effect (%) and failure, the drift path."""

    plan: Plan
    effects: dict[str, float]
    failures: dict[str, str]
    drift: tuple[float, ...] = field(repr=False)  # log level every DRIFT_DT seconds
    flags: dict[str, tuple[str, ...]] = field(default_factory=dict)  # each item's own XLA flags
    probe: str = ""  # the +3 % profile, when the sweep has one
    programs: dict[str, str] = field(default_factory=dict)  # candidate → its program's id (absent: its own)


DRIFT_DT = 60.0
Profile = tuple[str, tuple[str, ...], float, str]  # name, XLA flags, true effect (%), failure


def _cell() -> Cell:
    return Cell(
        path=Path("sim.yml"),
        model_tag="sim",
        slot=ClusterSlot(nodes=8),
        parallelism=Parallelism((("FSDP", 8),)),
        pdbs=7,
        env_file=(EnvFileEntry("xla", ENV_FLAG, ENV_DEPLOYED, ENV_DEFAULT),),
        backend=Backend(BackendKind.MAXTEXT_SLURM),
    )


def _pick(rng: random.Random, table: dict[int, float]) -> int:
    return rng.choices(list(table), weights=list(table.values()))[0]


def _other_effect(rng: random.Random) -> float:
    """A profile that is no lever: most within ±1 % (half exact no-ops), some slower, a few small gains."""
    u = rng.random()
    if u < 0.20:
        return -rng.uniform(1.3, 6.5) if rng.random() < 0.8 else -rng.uniform(6.5, 30.0)
    if u < 0.30:
        return rng.uniform(1.0, 2.5)
    return 0.0 if rng.random() < 0.5 else rng.uniform(-1.0, 1.0)


def draw(rng: random.Random, world: World, plan_kwargs: dict[str, object] | None = None) -> Sweep:
    """One sweep: 2 baselines, restore_default, evidence, 22-34 profiles, the winner's evidence."""
    n = rng.randint(*world.profiles)
    profiles: list[Profile] = []
    for i in range(n):
        effect = _other_effect(rng)
        profiles.append((f"p{i:02d}", (f"--xla_gpu_sim_flag{i}=true",), 0.0 if world.all_null else effect, ""))
    for j in rng.sample(range(n), _pick(rng, {0: 0.3, 1: 0.35, 2: 0.25, 3: 0.1})):
        name, flags, _, _ = profiles[j]
        profiles[j] = (name, flags, 0.0, "oom")
    if rng.random() < 0.4:
        j = rng.randrange(n)
        profiles[j] = (profiles[j][0], ("--xla_gpu_sim_obsolete=true",), 0.0, "unknown_flag")
    probe = ""
    if not world.all_null and rng.random() < 0.5:
        j = rng.randrange(n)
        probe = profiles[j][0]
        profiles[j] = (probe, ("--xla_gpu_sim_probe=true",), 3.0, "")
    levers = 0 if world.all_null else _pick(rng, {1: 0.65, 2: 0.35})
    for lever in range(levers):  # the dominant lever; then a weaker one
        best = rng.uniform(3.0, 12.0) if lever == 0 else rng.uniform(3.0, 5.0)
        count = _pick(rng, {1: 0.35, 2: 0.3, 3: 0.2, 4: 0.15})
        sizes = [best] + [best * rng.uniform(0.5, 0.97) for _ in range(count - 1)]
        rng.shuffle(sizes)
        at = rng.randrange(len(profiles) + 1)
        block: list[Profile] = [
            (f"lever{lever}_v{v}", (f"--xla_gpu_sim_lever{lever}={v}",), e, "") for v, e in enumerate(sizes)
        ]
        profiles[at:at] = block
    # Duplicates the effective-settings key must catch: the image default appended after the env
    # file's value (= restore_default), a copy with a redundant earlier value (last wins), and
    # the env file's own value (= the baseline).
    restore = 0.0 if world.all_null else _other_effect(rng)
    extra: list[Profile] = [("sim_env_default", (f"{ENV_FLAG}={ENV_DEFAULT}",), restore, "")]
    if rng.random() < 0.5:
        name, flags, effect, failure = profiles[rng.randrange(len(profiles))]
        value = flags[0].split("=", 1)
        extra.append((f"{name}_again", (f"{value[0]}=x", flags[0]), effect, failure))
    if rng.random() < 0.3:
        extra.append(("sim_env_deployed", (f"{ENV_FLAG}={ENV_DEPLOYED}",), 0.0, ""))
    for item in extra:
        profiles.insert(rng.randrange(len(profiles) // 2, len(profiles) + 1), item)
    specs = [
        RunSpec("wave1", "baseline", "default", RunKind.BASELINE),
        RunSpec("wave1", "baseline-r2", "default", RunKind.BASELINE),
        RunSpec(
            "wave1", "restore_default", "default", RunKind.RESTORE_DEFAULT, xla_flags=(f"{ENV_FLAG}={ENV_DEFAULT}",)
        ),
        RunSpec("wave1.5", "evidence", "default", RunKind.EVIDENCE, evidence=True),
    ]
    specs += [RunSpec("wave2", name, "default", RunKind.PROFILE, xla_flags=flags) for name, flags, _, _ in profiles]
    specs.append(RunSpec("evidence2", "winner", "default", RunKind.WINNER_EVIDENCE, evidence=True))
    items = plan_items(_cell(), specs)
    effects = {s.name: e for s, (_, _, e, _) in zip(specs[4:], profiles)}
    effects[specs[2].name] = restore
    failures = {s.name: f for s, (_, _, _, f) in zip(specs[4:], profiles) if f}
    drift = _drift(rng, world)
    return Sweep(
        Plan(items, **(plan_kwargs or {})),
        effects,
        failures,
        drift,  # type: ignore[arg-type]
        {s.name: s.xla_flags for s in specs},
        probe=f"wave2::{probe}[default]" if probe else "",
        programs=programs(rng, world, effects, failures),
    )


BASELINE_PROGRAM = "baseline"


def programs(rng: random.Random, world: World, effects: dict[str, float], failures: dict[str, str]) -> dict[str, str]:
    """Which candidates compile to the baseline's program: of the exact no-ops, each with odds
    world.inert_share (drawn last, one draw per candidate whatever the share, so worlds of two
    shares are the same clusters)."""
    found = {}
    for name, effect in effects.items():
        if rng.random() < world.inert_share and effect == 0.0 and name not in failures:
            found[name] = BASELINE_PROGRAM
    return found


def program_of(sweep: Sweep, item: str, role: Role) -> str:
    """The program a run of `item` compiles to: the baseline's for the baseline's own runs."""
    return BASELINE_PROGRAM if role.is_control else sweep.programs.get(item, item)


def _drift(rng: random.Random, world: World, hours: float = 30.0) -> tuple[float, ...]:
    level, path = 0.0, [0.0]
    scale = world.walk_pct_per_sqrt_h / 100 * math.sqrt(DRIFT_DT / 3600)
    jump = world.jump_rate_per_h * DRIFT_DT / 3600
    for _ in range(int(hours * 3600 / DRIFT_DT)):
        level += rng.gauss(0.0, scale)
        if rng.random() < jump:
            level += rng.choice((-1, 1)) * rng.uniform(*world.jump_pct) / 100
        path.append(level)
    return tuple(path)


def drift_at(sweep: Sweep, t: float) -> float:
    return sweep.drift[min(len(sweep.drift) - 1, max(0, int(t / DRIFT_DT)))]


def job(
    rng: random.Random,
    world: World,
    sweep: Sweep,
    item: PlanItem,
    effect_item: str,
    role: Role,
    cached: bool,
    now: float,
) -> Job:
    """The timeline of one job submitted at `now`: queue wait, init, compile, 15 steps."""
    start = now + rng.expovariate(1 / world.queue_wait_mean_s)
    init = rng.uniform(*world.init_s)
    failure = sweep.failures.get(effect_item, "") if role is Role.PROFILE or role is Role.WINNER_EVIDENCE else ""
    if failure == "unknown_flag":  # XLA parses XLA_FLAGS at start-up, before any compile
        return Job(start, (), (), 0, start + init / 2 + world.teardown_s, failure)
    t = start + init + rng.uniform(*(world.cached_compile_s if cached else world.compile_s))
    if failure == "oom":
        return Job(start, (), (), 0, t + world.teardown_s, failure)
    compiled = t
    evidence = role in (Role.EVIDENCE, Role.WINNER_EVIDENCE)
    effect = 0.0 if role.is_control or role is Role.EVIDENCE else sweep.effects.get(effect_item, 0.0)
    candidate = role in (Role.PROFILE, Role.WINNER_EVIDENCE)  # the winner's re-run is a candidate's run
    noise = world.profile_noise_pct if world.profile_noise_pct is not None and candidate else world.noise_pct
    level = math.log(world.base_tgs) + math.log1p(effect / 100) + rng.gauss(0.0, noise / 100)
    scatter = world.step_scatter_pct / 100
    innovation = scatter * math.sqrt(1 - world.step_autocorr**2)
    ar, ends, tgs = rng.gauss(0.0, scatter), [], []
    for step in range(STEPS):
        ar = world.step_autocorr * ar + rng.gauss(0.0, innovation)
        value = math.exp(level + drift_at(sweep, t) + ar + _burst(world, t))
        seconds = world.base_step_s * world.base_tgs / value * (1.5 if step == 0 else 1.0)
        if evidence and 5 <= step <= 8:
            seconds += world.profiler_overhead_s / 4
        t += seconds
        ends.append(t)
        tgs.append(value)
    return Job(start, tuple(ends), tuple(tgs), 9 if evidence else WARMUP, t + world.teardown_s, compiled=compiled)


def _burst(world: World, t: float) -> float:
    """The co-tenant's slow-down at time t (log units): burst_pct inside its windows, else 0."""
    if not world.burst_pct or (t / 3600) % world.burst_every_h >= world.burst_h:
        return 0.0
    return math.log1p(-world.burst_pct / 100)

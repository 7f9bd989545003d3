"""Flag catalogs: the data, the order and skips from evidence, catalog waves in cells and plans."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_xlatune.cell import catalog as table
from pytest_xlatune.cell.load import CellError, load_cell
from pytest_xlatune.cell.values import CatalogWave, Cell, ClusterSlot, ConfigTag, Parallelism, Profile, Stack
from pytest_xlatune.plan import catalog
from pytest_xlatune.plan.catalog import EvidenceFacts
from pytest_xlatune.plan.expand import RunKind, arrange, catalog_decisions, expand

FSDP_CPU = EvidenceFacts(
    "3",
    (("all-gather", 2 << 20), ("all-reduce", 1 << 20), ("all-to-all", 1 << 18)),
    compute_ms=72.0,
    collective_ms=226.0,
)


def names(cat: str) -> list[str]:
    return [c.name for c in table.get(cat).candidates]


def test_every_catalog_loads_with_valid_unique_names_and_known_mechanisms() -> None:
    assert set(table.names()) == {"fsdp", "pp", "tp", "hybrid", "cpu"}
    for cat in table.catalogs().values():
        assert len(set(names(cat.name))) == len(cat.candidates) > 0
        assert all(c.mechanism in table.MECHANISMS and (c.xla_flags or c.env) for c in cat.candidates)


def test_cpu_catalog_is_the_measured_cpu_flags() -> None:
    flags = {c.name: c.xla_flags for c in table.get("cpu").candidates}
    assert flags == {
        "ar_combiner_off": ("--xla_disable_hlo_passes=cpu-all-reduce-combiner",),
        "opt_o0": ("--xla_backend_optimization_level=0",),
        "opt_o1": ("--xla_backend_optimization_level=1",),
        "no_eigen_mt": ("--xla_cpu_multi_thread_eigen=false",),
        "fast_math_on": ("--xla_cpu_enable_fast_math=true",),
        "fast_math_off": ("--xla_cpu_enable_fast_math=false",),
    }
    assert {c.mechanism for c in table.get("cpu").candidates} == {"all-reduce", "compute"}


def test_values_become_one_profile_each_and_multi_flag_entries_set_every_flag() -> None:
    cands = {c.name: c for c in table.get("fsdp").candidates}
    assert [n for n in cands if n.startswith("ag_combine_")] == [
        "ag_combine_256m",
        "ag_combine_512m",
        "ag_combine_1g",
        "ag_combine_2g",
    ]
    assert cands["agrs_combine_1g"].xla_flags == (
        "--xla_gpu_all_gather_combine_threshold_bytes=1073741824",
        "--xla_gpu_reduce_scatter_combine_threshold_bytes=1073741824",
    )
    assert cands["nccl_proto_ll128"].env == (("NCCL_PROTO", "LL128"),)


def test_hybrid_holds_the_three_gpu_catalogs_once_each() -> None:
    hybrid = names("hybrid")
    assert set(hybrid) == set(names("fsdp")) | set(names("pp")) | set(names("tp"))
    assert len(hybrid) == len(set(hybrid))


# --- order and skips -----------------------------------------------------------------------------


def decide(cat: str, limit: int | None, facts: EvidenceFacts | None) -> list[tuple[str, str]]:
    cands = table.get(cat).candidates
    return [(cands[i].name, reason) for i, reason in catalog.decide([c.mechanism for c in cands], cat, limit, facts)]


def test_without_evidence_catalog_order_and_the_first_max_run() -> None:
    decided = decide("cpu", 2, None)
    assert [n for n, _ in decided] == names("cpu")
    assert [n for n, r in decided if not r] == ["ar_combiner_off", "opt_o0"]
    assert decided[2][1] == "beyond max 2 of catalog cpu (catalog order: no evidence run to order by yet)"


def test_dominant_collective_by_bytes_first_then_any_collective_then_compute() -> None:
    running = [n for n, r in decide("pp", None, FSDP_CPU) if not r]
    assert running[:2] == ["pipelined_ag", "pipelined_ar"]  # all-gather has the most bytes
    assert running[2:5] == ["overlap_2", "overlap_4", "overlap_8"]  # then any-collective, in catalog order


def test_mechanism_irrelevant_candidates_are_skipped_last_with_the_reason() -> None:
    decided = decide("pp", None, FSDP_CPU)
    skipped = [(n, r) for n, r in decided if r]
    assert [n for n, _ in skipped] == [
        "cp_decomp_256m",
        "cp_decomp_1g",
        "cp_decomp_8g",
        "pipelined_p2p",
        "async_cp",
        "pipelined_rs",
    ]
    assert decided[-len(skipped) :] == skipped
    assert skipped[3][1] == (
        "mechanism-irrelevant: acts on collective-permute, and the evidence HLO (job 3) has no collective-permute"
    )


def test_max_counts_only_candidates_that_apply() -> None:
    decided = decide("pp", 3, FSDP_CPU)
    assert [n for n, r in decided if not r] == ["pipelined_ag", "pipelined_ar", "overlap_2"]
    reasons = dict(decided)
    assert reasons["overlap_4"] == "beyond max 3 of catalog pp (ordered by the evidence of job 3)"
    assert reasons["cp_decomp_1g"].startswith("mechanism-irrelevant")


def test_max_keeps_the_candidates_the_adaptive_planner_expects_most_of() -> None:
    # The planner tries `opt_o1` first (another sweep measured it +104 %): the cap of 2 must not
    # drop it for the evidence order's first two (the planned order named it first, then the
    # sweep skipped it as "beyond max 2").
    cands = table.get("cpu").candidates
    gains = [104.0 if c.name == "opt_o1" else 0.0 for c in cands]
    facts = EvidenceFacts("9", (("all-reduce", 100),), compute_ms=300.0, collective_ms=20.0)
    decided = [(cands[i].name, r) for i, r in catalog.decide([c.mechanism for c in cands], "cpu", 2, facts, gains)]
    assert [n for n, r in decided if not r] == ["opt_o1", "opt_o0"]  # then the evidence order
    assert dict(decided)["no_eigen_mt"] == (
        "beyond max 2 of catalog cpu (ordered by expected gain, then the evidence of job 9)"
    )
    # No gain known anywhere: the evidence order decides, as before.
    flat = catalog.decide([c.mechanism for c in cands], "cpu", 2, facts, [0.0] * len(cands))
    assert flat == catalog.decide([c.mechanism for c in cands], "cpu", 2, facts)


def test_compute_first_when_the_profile_shows_more_compute_than_collectives() -> None:
    compute_bound = EvidenceFacts("9", (("all-reduce", 100),), compute_ms=300.0, collective_ms=20.0)
    running = [n for n, r in decide("cpu", None, compute_bound) if not r]
    assert running == ["opt_o0", "opt_o1", "no_eigen_mt", "fast_math_on", "fast_math_off", "ar_combiner_off"]
    no_profile = EvidenceFacts("9", (("all-reduce", 100),))
    assert decide("cpu", None, no_profile)[0][0] == "ar_combiner_off"


def test_no_collectives_at_all_skips_any_collective_candidates() -> None:
    facts = EvidenceFacts("4", ())
    reasons = dict(decide("fsdp", None, facts))
    assert reasons["overlap_2"].endswith("the evidence HLO (job 4) has none")
    assert reasons["mem95"] == ""


# --- plans --------------------------------------------------------------------------------------


def make_cell(**changes: object) -> Cell:
    base = {
        "path": Path("cells/x.yml"),
        "model_tag": "m",
        "slot": ClusterSlot(nodes=1),
        "parallelism": Parallelism((("FSDP", 8),)),
        "baseline_repeats": 1,
        "config_tags": (ConfigTag("default"),),
        "profiles": (Profile("mine", 2, ("--xla_a=1",)),),
        "catalog_waves": (CatalogWave(2, "pp", 3, line=7),),
        "stacks": (Stack(3, 2, line=9),),
    }
    base.update(changes)
    return Cell(**base)  # type: ignore[arg-type]


def test_a_profiles_mechanisms_come_from_the_catalogs_else_from_its_names() -> None:
    assert table.mechanisms_of(("--xla_gpu_all_gather_combine_threshold_bytes=1",), ()) == ("all-gather",)
    assert table.mechanisms_of(("--xla_cpu_enable_fast_math=true",), ()) == ("compute",)  # catalog: compute
    # Not in a catalog: the name says it; a pass list says what its passes act on.
    assert table.mechanisms_of(("--xla_gpu_enable_pipelined_p2p=false",), ()) == ("collective-permute",)
    assert table.mechanisms_of(("--xla_disable_hlo_passes=cpu-all-reduce-combiner",), ()) == ("all-reduce",)
    assert table.mechanisms_of(("--xla_disable_hlo_passes=algsimp",), ()) == ()
    assert table.mechanisms_of((), (("NCCL_MIN_NCHANNELS", "4"),)) == ("collectives",)
    assert table.mechanisms_of(("--xla_gpu_reduce_scatter_combine_threshold_bytes=1", "--xla_foo=1"), ()) == (
        "reduce-scatter",
    )
    assert table.mechanisms_of(("--xla_gpu_sim_p01=true",), ()) == ()  # nothing known: no hint


def test_evidence_hints_rank_what_leads_the_step_and_send_irrelevant_ones_last() -> None:
    found = {
        name: (pct, why)
        for name, pct, why in catalog.hints(
            {
                "ar": ("all-reduce",),
                "ag": ("all-gather",),
                "any": ("collectives",),
                "math": ("compute",),
                "cp": ("collective-permute",),
                "both": ("collective-permute", "all-gather"),  # one relevant mechanism is enough
                "unknown": (),
            },
            FSDP_CPU,
        )
    }
    top = catalog.EVIDENCE_HINT_PCT
    assert found["ag"][0] == found["both"][0] == top
    assert found["ar"][0] == top / 2 and found["any"][0] == top / 3 and found["math"][0] == top / 4
    assert found["cp"][0] == -top and "unknown" not in found
    assert (
        found["ag"][1] == "acts on all-gather, the collective with the most bytes in the evidence HLO (job 3) (place 1)"
    )
    assert found["ar"][1].startswith("acts on all-reduce, collective 2 of 3 by bytes")
    assert "shows less compute than collective time" in found["math"][1]
    assert found["cp"][1].startswith("mechanism-irrelevant: acts on collective-permute")
    # More compute than collective time: compute leads.
    compute = EvidenceFacts("4", FSDP_CPU.bytes_by_kind, compute_ms=300.0, collective_ms=20.0)
    ranked = sorted(catalog.hints({"ag": ("all-gather",), "math": ("compute",)}, compute), key=lambda h: -h[1])
    assert [name for name, _, _ in ranked] == ["math", "ag"]


def test_collective_candidates_go_after_the_rest_when_collectives_cannot_make_a_win() -> None:
    """A profile whose collective time is 3 % of its busy time: removing it all gains < +5 %."""
    small = EvidenceFacts("5", FSDP_CPU.bytes_by_kind, compute_ms=97.0, collective_ms=3.0)
    assert catalog.collective_share(small) == pytest.approx(3.0)
    assert catalog.collective_share(EvidenceFacts("6", FSDP_CPU.bytes_by_kind)) is None  # no profile
    mechanisms = {"ag": ("all-gather",), "any": ("collectives",), "math": ("compute",), "cp": ("collective-permute",)}
    found = {name: (pct, why) for name, pct, why in catalog.hints(mechanisms, small, win_pct=5.0)}
    assert found["math"][0] == catalog.EVIDENCE_HINT_PCT  # the only mechanism left to lead
    assert found["ag"][0] == found["any"][0] == -catalog.EVIDENCE_HINT_PCT / 2
    assert found["cp"][0] == -catalog.EVIDENCE_HINT_PCT  # irrelevant still runs last
    assert found["ag"][1] == (
        "acts on all-gather, and collectives are 3.0 % of the evidence profile's busy time (job 5): "
        "less than the +5 % a win needs"
    )
    # Above the win threshold, or without one, collectives keep their place.
    assert {n: p for n, p, _ in catalog.hints(mechanisms, small, win_pct=2.0)}["ag"] > 0
    assert {n: p for n, p, _ in catalog.hints(mechanisms, small)}["ag"] > 0


def test_catalog_wave_expands_to_statically_named_items_after_the_hand_written_ones() -> None:
    specs = expand(make_cell())
    wave2 = [s.name for s in specs if s.wave == "wave2"]
    assert wave2 == ["wave2::mine[default]"] + [f"wave2::{n}[default]" for n in names("pp")]
    cp = next(s for s in specs if s.profile == "cp_decomp_1g")
    assert (cp.catalog, cp.mechanism, cp.line) == ("pp", "collective-permute", 7)
    assert cp.xla_flags == ("--xla_gpu_collective_permute_decomposer_threshold=1073741824",)
    assert expand(make_cell()) == specs  # pure: the same every time


def test_stack_and_winner_evidence_follow_waves_2_to_4() -> None:
    specs = expand(make_cell())
    tail = [s.name for s in specs if not s.wave.startswith(("wave1", "wave2"))]
    assert tail == ["wave3::stack_top2[default]", "evidence2::winner[default]"]
    stack = next(s for s in specs if s.kind is RunKind.STACK)
    assert stack.needs_resolution and stack.top == 2 and stack.exploratory


def test_arrange_orders_catalog_items_by_evidence_and_keeps_the_rest_in_place() -> None:
    cell = make_cell()
    specs = expand(cell)
    arranged = [s.profile for s in arrange(cell, specs, FSDP_CPU)]
    assert arranged[:4] == ["baseline", "evidence", "mine", "pipelined_ag"]
    assert arranged[-2:] == ["stack_top2", "winner"]
    assert sorted(arranged) == sorted(s.profile for s in specs)
    assert [s.profile for s in arrange(cell, specs, None)] == [s.profile for s in specs]
    decisions = catalog_decisions(cell, specs, FSDP_CPU)
    assert decisions["wave2::async_cp[default]"][1].startswith("mechanism-irrelevant")
    assert "wave2::mine[default]" not in decisions


# --- cells --------------------------------------------------------------------------------------

HEAD = "model_tag: m\nnodes: 1\nparallelism: FSDP=8\n"


def cell_file(tmp_path: Path, waves: str) -> Path:
    path = tmp_path / "c.yml"
    path.write_text(HEAD + "waves:\n" + waves)
    return path


def test_wave_mapping_reads_profiles_catalog_max_and_stack(tmp_path: Path) -> None:
    cell = load_cell(
        cell_file(
            tmp_path,
            "  2: {catalog: cpu, max: 4}\n"
            "  3:\n    profiles:\n      - {name: a, xla_flags: [--xla_a=1]}\n"
            "    stack: true\n"
            "  4: {stack: 3}\n",
        )
    )
    assert cell.catalog_waves == (CatalogWave(2, "cpu", 4, line=5),)
    assert [p.name for p in cell.profiles] == ["a"]
    assert cell.stacks == (Stack(3, 2, line=9), Stack(4, 3, line=10))


@pytest.mark.parametrize(
    ("waves", "key", "line", "expected", "found"),
    [
        (
            "  2: {catalog: fdsp}\n",
            "waves.2.catalog",
            5,
            "a flag catalog: one of fsdp, pp, tp, hybrid, cpu",
            "'fdsp' (did you mean 'fsdp'?)",
        ),
        ("  2: {max: 3}\n", "waves.2.max", 5, "a 'catalog' key next to max", "no 'catalog' key"),
        ("  2: {catalog: cpu, max: 0}\n", "waves.2.max", 5, "an integer >= 1", "0 (an integer)"),
        (
            "  2: {stack: 1}\n",
            "waves.2.stack",
            5,
            "true or an integer from 2 to 999 (how many winning profiles to combine)",
            "1 (an integer)",
        ),
        (
            "  2: {stack: lots}\n",
            "waves.2.stack",
            5,
            "true or an integer from 2 to 999 (how many winning profiles to combine)",
            "'lots'",
        ),
        ("  2: {}\n", "waves.2", 5, "at least one of profiles, catalog, stack", "none of them"),
        (
            "  2: {catalog: cpu, ordr: 1}\n",
            "waves.2.ordr",
            5,
            "one of profiles, catalog, max, stack",
            "unknown key 'ordr'",
        ),
        ("  2: cpu\n", "waves.2", 5, "a list of profiles, or a mapping of profiles, catalog, max, stack", "'cpu'"),
        # A profile named like a catalog candidate: the profile is blamed (its name is the cell's),
        # whichever comes first, with the catalog's line.
        (
            "  2: [{name: opt_o0, xla_flags: [--xla_a=1]}]\n  3: {catalog: cpu}\n",
            "waves.2[0].name",
            5,
            "a profile name that is not a candidate of catalog cpu (line 6)",
            "'opt_o0'",
        ),
        (
            "  2: {catalog: cpu}\n  3: [{name: opt_o0, xla_flags: [--xla_a=1]}]\n",
            "waves.3[0].name",
            6,
            "a profile name that is not a candidate of catalog cpu (line 5)",
            "'opt_o0'",
        ),
        # Two catalogs sharing entries: the way out is the catalog that holds them together.
        (
            "  2: {catalog: tp}\n  3: {catalog: fsdp}\n",
            "waves.3.catalog",
            6,
            "catalogs that share no candidate (fsdp, pp and tp share entries: `catalog: hybrid` sweeps all "
            "three in one wave)",
            "'fsdp', whose candidate 'nccl_chan_8' catalog tp (line 5) has too",
        ),
        (
            "  2: {catalog: cpu}\n  3: {catalog: cpu}\n",
            "waves.3.catalog",
            6,
            "each catalog once",
            "'cpu' again (first on line 5)",
        ),
        (
            "  2: [{name: stack_top2, xla_flags: [--xla_a=1]}]\n",
            "waves.2[0].name",
            5,
            "a name other than baseline, restore_default, evidence, best, winner, stack_topN",
            "'stack_top2'",
        ),
        (
            "  2: {stack: 2}\n  3: {stack: 2}\n",
            "waves.3.stack",
            6,
            "a stack size unique across all waves",
            "'stack_top2' again (first on line 5)",
        ),
    ],
)
def test_bad_catalog_or_stack_is_one_line_naming_key_and_line(
    tmp_path: Path, waves: str, key: str, line: int, expected: str, found: str
) -> None:
    with pytest.raises(CellError) as info:
        load_cell(cell_file(tmp_path, waves))
    message = str(info.value)
    assert message.startswith(f"{tmp_path / 'c.yml'}:{line}: {key}: expected {expected}")
    assert found in message and "\n" not in message

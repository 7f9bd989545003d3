"""A recipe lock edited by hand: every key of the type the gate uses, or one line naming it."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_xlatune.verdict.lock import Lock, LockedRecipe, LockError, dumps, load_lock

LOCK = Lock(
    model_tag="m",
    parallelism="FSDP=8",
    image="",
    nodelist="localhost",
    date="2026-12-03",
    recipes=(
        LockedRecipe(
            config_tag="default",
            profile="fast",
            xla_flags=("--xla_a=1",),
            env=(("NCCL_X", "1"),),
            overrides=(),
            tgs=1100.0,
            ci_low_pct=9.0,
            ci_high_pct=11.0,
            baseline_tgs=1000.0,
            delta_pct=10.0,
            job_ids=("6",),
        ),
    ),
)


def _set(*path: str | int, to: object) -> Callable[[Any], None]:
    def edit(data: Any) -> None:
        for key in path[:-1]:
            data = data[key]
        data[path[-1]] = to

    return edit


def _drop(key: str) -> Callable[[Any], None]:
    return lambda data: data.pop(key)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (_set("image", to=["a"]), "image: expected a string, found a list"),
        (_set("model_tag", to={"x": 1}), "model_tag: expected a string, found an object"),
        (_set("date", to="<b>x</b> [l](http://e)"), "date: expected a date YYYY-MM-DD, found '<b>x</b> [l](http://e)'"),
        (
            _set("measured_on", to="a\nb"),
            "measured_on: expected one line of at most 4096 characters, no control characters, found 'a\\nb'",
        ),
        (_set("measured_on", to="\u001b]0;t\u0007"), "measured_on: expected one line of * found '\\x1b]0;t\\x07'"),
        (_set("image", to="<script>"), "image: expected a container image *, found '<script>'"),
        (_set("image", to="a b;c"), "image: expected a container image *, found 'a b;c'"),
        (_set("nodelist", to="\u001b]0;t\u0007"), "nodelist: expected * found '\\x1b]0;t\\x07'"),
        (_set("nodelist", to="node01;reboot"), "nodelist: expected a Slurm nodelist *, found 'node01;reboot'"),
        (
            _set("nodelist", to="node[04-01]"),
            "nodelist: expected a Slurm nodelist *, each range low-high, found 'node[04-01]' (the range 04-01 runs backwards)",
        ),
        (_set("parallelism", to="<script>"), "parallelism: expected AXIS=N* found '<script>'"),
        (
            _set("recipes", 0, "tgs", to=1e308),
            "recipes[0].tgs: expected tokens/s/device above 0 and below 1e+09, found 1e+308",
        ),
        (_set("recipes", 0, "baseline_tgs", to=-5), "recipes[0].baseline_tgs: expected tokens/s/device * found -5"),
        (_set("recipes", 0, "tgs", to=0), "recipes[0].tgs: expected tokens/s/device * found 0"),
        (
            _set("recipes", 0, "delta_pct", to=-1e300),
            "recipes[0].delta_pct: expected a percentage within ±1e+06, found -1e+300",
        ),
        (_set("recipes", 0, "ci_high_pct", to=1e7), "recipes[0].ci_high_pct: expected a percentage * found 10000000.0"),
        (_set("recipes", to={}), "recipes: expected a list, found an object"),
        (_set("recipes", 0, to=[]), "recipes[0]: expected a JSON object, found a list"),
        (_set("recipes", 0, "tgs", to="x" * 3000), "recipes[0].tgs: expected a number, found 'xxxxx*..."),
        (_set("recipes", 0, "tgs", to=True), "recipes[0].tgs: expected a number, found a boolean"),
        (_set("recipes", 0, "delta_pct", to=1e400), "recipes[0].delta_pct: expected a finite number, found inf"),
        (_set("recipes", 0, "env", 0, to=[1]), "recipes[0].env[0]: expected a [name, value] pair, found [1]"),
        (_set("recipes", 0, "env", 0, 1, to="a b"), "recipes[0].env[0][1]: expected an environment value *"),
        (
            _set("recipes", 0, "xla_flags", to="--xla_a=1"),
            "recipes[0].xla_flags: expected a list of strings, found a string",
        ),
        (_set("recipes", 0, "job_ids", 0, to=6), "recipes[0].job_ids[0]: expected a string, found a number"),
        (_set("recipes", 0, "profile", to="p" * 3000), "recipes[0].profile: expected a name *, found 'ppp*..."),
        (
            _drop("nodelist"),
            "nodelist: expected a key written by the sweep (write the lock again: rerun the sweep), found none",
        ),
        (_set("schema", to=True), "schema: expected 1, found True"),
    ],
)
def test_a_hand_edited_lock_is_one_line_naming_the_key(
    tmp_path: Path, edit: Callable[[Any], None], message: str
) -> None:
    path = tmp_path / "c.lock.json"
    data = json.loads(dumps(LOCK))
    edit(data)
    path.write_text(json.dumps(data).replace("Infinity", "1e400"))  # a number JSON reads as inf
    with pytest.raises(LockError) as caught:
        load_lock(path)
    text = str(caught.value)
    assert "\n" not in text and len(text) < 300
    assert re.fullmatch(re.escape(f"{path}: {message}").replace(r"\*", ".*"), text), text


def test_nan_and_infinity_in_a_lock_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "c.lock.json"
    path.write_text(dumps(LOCK).replace('"tgs": 1100.0', '"tgs": NaN'))
    with pytest.raises(LockError, match=r"expected JSON, found NaN \(a lock holds finite numbers\)"):
        load_lock(path)


def test_an_unchanged_lock_and_one_without_optional_keys_load(tmp_path: Path) -> None:
    path = tmp_path / "c.lock.json"
    path.write_text(dumps(LOCK))
    assert load_lock(path) == LOCK
    data = json.loads(dumps(LOCK))
    del data["measured_on"], data["recipes"][0]["unset_env"]
    path.write_text(json.dumps(data))
    assert load_lock(path) == LOCK

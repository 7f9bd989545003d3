"""Does pooling wave 6's re-measurements into the noise overstate it? A seeded simulation.

    python bench/remeasure_noise.py [--trials 3000] [--cv 0.8]

Replays the wave-6 loop (engine/sweep.py `Sweep.gate_cross_config`, judged with judge.stats exactly
as the sweep judges it): two baseline repeats, one run of the recipe at a true Δ, re-measured
while the 1 % regression check is ambiguous (thresholds.remeasure = 2). For each true Δ it
prints how often re-measurements happen and, over every check, the noise the sample shows (√ of
the mean CV², no prior) from the baseline repeats alone (an unbiased estimate of the true CV²)
and with the recipe's runs pooled as one more identical-settings group whenever there are
several — against the true CV; then the same over the checks that were re-measured (what a
decision after re-measuring sees). In the sweep they are never pooled: the tag's runs hold each item's first run only
(plan.resolve.current_results); this measures whether pooling them would overstate the noise.
"""

from __future__ import annotations

import argparse
import math
import sys

import numpy as np

from pytest_xlatune.verdict import stats

REMEASURE, TOLERANCE_PCT, BASE = 2, 1.0, 1000.0


def trial(rng: np.random.Generator, delta_pct: float, cv_pct: float) -> tuple[list[float], list[float]]:
    """(baseline repeats, the recipe's runs) of one simulated wave-6 check."""

    def one(level: float) -> float:
        return float(level * (1 + rng.normal(0, cv_pct / 100)))

    base = [one(BASE), one(BASE)]
    runs = [one(BASE * (1 + delta_pct / 100))]
    while True:
        final = len(runs) > REMEASURE
        check = stats.decide_after_remeasure if final else stats.regression_check
        if check(runs, base, stats.pooled_noise([base]), TOLERANCE_PCT) is not stats.GateDecision.AMBIGUOUS:
            return base, runs
        runs.append(one(BASE * (1 + delta_pct / 100)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=3000)
    parser.add_argument("--cv", type=float, default=0.8, help="true run-to-run CV in %% (0.8)")
    ns = parser.parse_args()
    rng = np.random.default_rng(1)
    print(f"true CV {ns.cv} %, {ns.trials} trials per Δ, re-measured while ambiguous (≤ {REMEASURE})")
    for delta in (-3.0, 0.0, 2.0, 3.0):
        alone, pooled, cond_alone, cond_pooled = [], [], [], []
        for _ in range(ns.trials):
            base, runs = trial(rng, delta, ns.cv)
            a = stats.pooled_noise([base], prior_df=0).cv_pct ** 2
            p = stats.pooled_noise([base, runs], prior_df=0).cv_pct ** 2
            alone.append(a)
            pooled.append(p)
            if len(runs) > 1:
                cond_alone.append(a)
                cond_pooled.append(p)
        rms = [math.sqrt(float(np.mean(x))) if x else math.nan for x in (alone, pooled, cond_alone, cond_pooled)]
        print(
            f"true Δ {delta:+.0f} %: re-measured in {len(cond_alone) / ns.trials * 100:5.1f} % of "
            f"checks; over every check: baseline repeats {rms[0]:.3f} %, re-measured runs pooled "
            f"{rms[1]:.3f} %; over the re-measured checks: {rms[2]:.3f} % vs {rms[3]:.3f} %",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

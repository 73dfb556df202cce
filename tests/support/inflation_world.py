"""Simulated models on a private eval and a public benchmark, with known truth, for the
public-inflation tests and benchmark (`bench/public_inflation.py`).

Every model has one latent ability. The private eval holds free-answer items (two-parameter
logistic: difficulty ~ N(0.5, 1), discrimination ~ logN(0, 0.3)); the public benchmark is easier
and multiple-choice (difficulty ~ N(−0.8, 1.2), discrimination ~ logN(0.3, 0.3), a guessing floor
of 0.25), so the relation between the two scores bends, flattening at the floor. Scores are 0/1.
Reference abilities are uniform on [−2, 2]; the target's lies inside [−1.5, 1.5] unless placed.
A planted inflation of k points turns round(k · public items) of the target's failed public items
into passes (all of them where fewer failed), as training on the benchmark's answers would.
`spread` gives each model its own public-only skill (a normal shift of its ability on the public
benchmark, in logits), the case where models really differ beyond one ability.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.special import expit

FloatArray = NDArray[np.float64]
GUESSING_FLOOR = 0.25


@dataclass(frozen=True)
class InflationWorld:
    """Per-item 0/1 scores: reference models × items on each side, and the target's rows."""

    reference_private: FloatArray
    reference_public: FloatArray
    target_private: FloatArray
    target_public: FloatArray
    reference_ability: FloatArray
    target_ability: float
    planted: int

    @property
    def reference_models(self) -> list[str]:
        """Names for the reference rows, `ref-00`, `ref-01`, ..."""
        return [f"ref-{number:02d}" for number in range(self.reference_private.shape[0])]


def _private_probabilities(rng: np.random.Generator, ability: FloatArray, items: int) -> FloatArray:
    difficulty = rng.normal(0.5, 1.0, items)
    discrimination = rng.lognormal(0.0, 0.3, items)
    return np.asarray(expit(discrimination * (ability[:, None] - difficulty)), dtype=np.float64)


def _public_probabilities(rng: np.random.Generator, ability: FloatArray, items: int) -> FloatArray:
    difficulty = rng.normal(-0.8, 1.2, items)
    discrimination = rng.lognormal(0.3, 0.3, items)
    return np.asarray(GUESSING_FLOOR + (1 - GUESSING_FLOOR) * expit(discrimination * (ability[:, None] - difficulty)), dtype=np.float64)


def inflation_world(
    rng: np.random.Generator,
    *,
    references: int = 10,
    private_items: int = 300,
    public_items: int = 300,
    inflation: float = 0.0,
    spread: float = 0.0,
    target_ability: float | None = None,
) -> InflationWorld:
    """One simulated world: `references` reference models and one target, each scored on the same
    `private_items` and `public_items`; the target's public score raised by `inflation` (0.10: ten
    points) by turning failed items into passes. `target_ability` places the target (default:
    uniform on [−1.5, 1.5], inside the reference models' range)."""
    reference_ability = rng.uniform(-2.0, 2.0, references)
    own = float(rng.uniform(-1.5, 1.5)) if target_ability is None else target_ability
    ability = np.append(reference_ability, own)
    private = (rng.random((references + 1, private_items)) < _private_probabilities(rng, ability, private_items)).astype(np.float64)
    public_ability = ability + (rng.normal(0.0, spread, ability.size) if spread > 0 else 0.0)
    public = (rng.random((references + 1, public_items)) < _public_probabilities(rng, public_ability, public_items)).astype(np.float64)
    planted = 0
    if inflation > 0:
        failed = np.flatnonzero(public[-1] == 0)
        planted = min(failed.size, round(inflation * public_items))
        public[-1, rng.choice(failed, size=planted, replace=False)] = 1.0
    return InflationWorld(private[:-1], public[:-1], private[-1], public[-1], reference_ability, own, planted)

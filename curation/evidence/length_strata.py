"""Length matching for contamination tests: strata of similar length, and the share of pre-cutoff
items a threshold would pass by chance given their lengths.

Dated corpora drift: older items may be shorter or longer, and a score normalised by length moves
with length even for a model that has seen nothing. A headline such as "12% of pre-cutoff items lie
above the control's 95th percentile" then means nothing against 5%: where short items score higher
by chance and the older ones are shorter, more than 5% of them lie above it without any memorising.
`expected_share_above` says how many would, so that the share is read against its own expectation.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats

LENGTH_STRATA = 10
"""Strata of remainder length for length-matched statistics (quantiles of all probed remainders)."""


def length_strata(pre_lengths: ArrayLike, control_lengths: ArrayLike, *, strata: int = LENGTH_STRATA) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Each item's stratum (0 .. `strata` − 1), pre-cutoff and control: quantile bins of all the
    lengths together, so that every stratum holds about as many items (ties may leave some empty)."""
    pre = np.asarray(pre_lengths, dtype=np.float64)
    control = np.asarray(control_lengths, dtype=np.float64)
    lengths = np.concatenate([pre, control])
    edges = np.quantile(lengths, np.linspace(0.0, 1.0, strata + 1)[1:-1])
    stratum = np.searchsorted(edges, lengths, side="right").astype(np.int64)
    return stratum[: pre.size], stratum[pre.size :]


def leave_one_out_quantile(values: ArrayLike, quantile: float) -> tuple[float, NDArray[np.float64]]:
    """The `quantile` of `values` (numpy's linear interpolation) and, for each value, the same
    quantile of the other values (itself left out), in the order given. Needs at least 2 values."""
    data = np.asarray(values, dtype=np.float64)
    n = data.size
    if n < 2:
        raise ValueError(f"need at least 2 values for a quantile without one of them (got {n})")
    order = np.argsort(data, kind="stable")
    ordered = data[order]
    position = quantile * (n - 2)
    low = int(np.floor(position))
    fraction = position - low
    high = min(low + 1, n - 2)
    removed = np.arange(n)  # the rank of the value left out
    # Without rank r, the i-th smallest of the rest is ordered[i] below r and ordered[i + 1] from it.
    below = np.where(low < removed, ordered[low], ordered[min(low + 1, n - 1)])
    above = np.where(high < removed, ordered[high], ordered[min(high + 1, n - 1)])
    without = np.empty(n)
    without[order] = below + fraction * (above - below)
    return float(np.quantile(data, quantile)), without


def expected_share_above(
    quantile: float,
    *,
    pre_lengths: ArrayLike,
    control: ArrayLike,
    control_lengths: ArrayLike,
    strata: int = LENGTH_STRATA,
) -> float:
    """The share of pre-cutoff items expected above the control's `quantile` by chance, given the
    pre-cutoff items' lengths: over the pre-cutoff items, the mean of the share of control items of
    the same length stratum (`length_strata`) that lie above the control's quantile.

    Why this and not a threshold per stratum: the headline share keeps one threshold (the chart's
    line, the per-item flags), and a 95th percentile of a stratum's few control items is its top
    item, which unseen items pass well over 5% of the time. Each control item is judged against the
    quantile of the other control items (itself left out), so that it stands as an unseen item does
    against the whole band: on average over draws where nothing was seen, the pre-cutoff share above
    the control's quantile equals this expectation, whatever the lengths. A stratum with no control
    item borrows the share of the nearest one that has some. With the same lengths on both sides it
    is about 1 − `quantile`; ties (many scores of exactly 0) move it, as they move the share.
    """
    values = np.asarray(control, dtype=np.float64)
    _, without = leave_one_out_quantile(values, quantile)
    exceeds = (values > without).astype(np.float64)
    pre_stratum, control_stratum = length_strata(pre_lengths, control_lengths, strata=strata)
    if pre_stratum.size == 0:
        return float("nan")
    counts = np.bincount(control_stratum, minlength=strata).astype(np.float64)
    above = np.bincount(control_stratum, weights=exceeds, minlength=strata)
    filled = np.flatnonzero(counts > 0)
    nearest = filled[np.abs(np.arange(strata)[:, None] - filled[None, :]).argmin(axis=1)]
    share_by_stratum = above[nearest] / counts[nearest]
    return float(share_by_stratum[pre_stratum].mean())


def length_matched_mann_whitney(pre: ArrayLike, control: ArrayLike, *, pre_lengths: NDArray[np.int64], control_lengths: NDArray[np.int64], strata: int = LENGTH_STRATA) -> float:
    """One-sided p-value that pre-cutoff similarities are not higher than the control's when items
    are compared only with items of similar remainder length.

    Strata are `strata` quantile bins of all remainder lengths; within each, the Mann–Whitney U of
    pre against control is taken, and the sum of the U's is tested against its null mean and
    tie-corrected variance (normal approximation with continuity correction). Strata missing one
    of the bands contribute nothing; with no usable stratum, or all values tied, the p-value is 1.
    """
    pre, control = np.asarray(pre, dtype=np.float64), np.asarray(control, dtype=np.float64)
    stratum = np.concatenate(length_strata(pre_lengths, control_lengths, strata=strata))
    values = np.concatenate([pre, control])
    is_pre = np.arange(values.size) < pre.size
    # Rank within each stratum in one pass: sort by (stratum, value), average the ranks of tied runs.
    order = np.lexsort((values, stratum))
    sorted_stratum, sorted_values = stratum[order], values[order]
    new_run = np.r_[True, (sorted_stratum[1:] != sorted_stratum[:-1]) | (sorted_values[1:] != sorted_values[:-1])]
    run_id = np.cumsum(new_run) - 1
    run_start = np.flatnonzero(new_run)
    run_size = np.diff(np.r_[run_start, values.size])
    stratum_start = np.searchsorted(sorted_stratum, sorted_stratum, side="left")
    ranks = np.empty(values.size)
    ranks[order] = (run_start[run_id] + (run_size[run_id] - 1) / 2.0) - stratum_start + 1.0
    n1 = np.bincount(stratum[is_pre], minlength=strata).astype(np.float64)
    n2 = np.bincount(stratum[~is_pre], minlength=strata).astype(np.float64)
    rank_sum = np.bincount(stratum[is_pre], weights=ranks[is_pre], minlength=strata)
    ties = np.bincount(sorted_stratum[run_start], weights=run_size.astype(np.float64) ** 3 - run_size, minlength=strata)
    usable = (n1 > 0) & (n2 > 0)
    n = n1 + n2
    u_total = float(np.sum((rank_sum - n1 * (n1 + 1) / 2.0)[usable]))
    mean_total = float(np.sum((n1 * n2 / 2.0)[usable]))
    variance_total = float(np.sum((n1 * n2 / 12.0 * ((n + 1) - ties / np.maximum(n * (n - 1), 1.0)))[usable]))
    if variance_total <= 0.0:
        return 1.0
    z = (u_total - mean_total - 0.5) / np.sqrt(variance_total)
    return float(stats.norm.sf(z))

"""The plain-language parts of evidence reports: what the evidence is, what it is not, and what to
do about a positive result. One wording for every report, so the service and CLI say the same."""

from __future__ import annotations

from datetime import date


def evidence_statement(*, what: str, model: str, corpus: str, cutoff: date, n_after: int) -> str:
    """The statement every evidence report carries.

    It says that the report is evidence about one score (`what`) for one model, not an accusation,
    and that the sensible action on a positive result is to base decisions on the `n_after` items
    dated on or after `cutoff`.
    """
    return (
        f"This is evidence about one score ({what}) for one model ({model}) on {corpus}, not an accusation "
        "that the model was trained on these items, and not a verdict on the model. Older items can differ "
        "for innocent reasons too: they may be easier, written differently, or drawn from a different mix of "
        "sources. The sensible action on a positive result is to move the decision onto items dated on or "
        f"after the model's training cutoff ({cutoff.isoformat()}; {n_after} such items here), which the model "
        "cannot have seen in training."
    )


def points(value: float) -> str:
    """A score difference in points with its sign: 0.105 -> '+10.5 points'."""
    return f"{value * 100:+.1f} points"


def p_text(p_value: float) -> str:
    """A p-value as a person reads it."""
    if p_value < 0.001:
        return "p < 0.001"
    return f"p = {p_value:.3f}"

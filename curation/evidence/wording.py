"""The plain-language parts of evidence reports: what the evidence is, what it is not, and what to
do about a positive result. One wording for every report, so the service and CLI say the same."""

from __future__ import annotations

from datetime import date

from schemas.probe_tests import ProbeTest


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


def public_inflation_statement(*, model: str, corpus: str, eval_name: str, references: int, private_items: int) -> str:
    """The statement of the public-inflation report: evidence about one score (the model's score on
    the public `corpus`), judged against `references` other models, never a verdict; and that the
    sensible action on a positive result is to decide on the private eval (`private_items` items).
    """
    return (
        f"This is evidence about one score (the public score on {corpus}) for one model ({model}), judged against how "
        f"{references} other models' public scores follow their scores on the private eval {eval_name}; it is not an accusation "
        "that the model was trained on the public benchmark, and not a verdict on the model. A public score can sit above "
        "the line for innocent reasons too: the benchmark may reward skills or a format the private eval does not test, "
        "and the reference models may differ from this one in ways their scores do not show. The sensible action on a "
        f"positive result is to base decisions on the private eval ({private_items} items here), whose fresh, unpublished "
        "items a model is far less likely to have trained on, rather than on the public score."
    )


def points(value: float) -> str:
    """A score difference in points with its sign: 0.105 -> '+10.5 points'."""
    return f"{value * 100:+.1f} points"


def p_text(p_value: float) -> str:
    """A p-value as a person reads it."""
    if p_value < 0.001:
        return "p < 0.001"
    return f"p = {p_value:.3f}"


_TEST_NAMES: dict[ProbeTest, str] = {
    ProbeTest.COMPLETION: "completion similarity",
    ProbeTest.LOGPROB: "log-probability membership test",
    ProbeTest.REFERENCE_LOGPROB: "reference-calibrated log-probability test",
}
_FLAGGED = {
    ProbeTest.COMPLETION: "The model reproduces the older items more closely than items it cannot have seen, which is what having seen them would produce.",
    ProbeTest.LOGPROB: "The model finds the older items' text likelier than that of items it cannot have seen, which is what having seen them would produce.",
    ProbeTest.REFERENCE_LOGPROB: (
        "Against the reference model, the model finds the older items' text likelier than that of items it cannot have seen, "
        "which is what having seen them would produce."
    ),
}
_NOT_FLAGGED = {
    ProbeTest.COMPLETION: "The older items are reproduced no more closely than chance explains: no sign here that the model has seen them.",
    ProbeTest.LOGPROB: "The model finds the older items no likelier than chance explains: no sign here that it has seen them.",
    ProbeTest.REFERENCE_LOGPROB: "Against the reference model, the older items are no likelier than chance explains: no sign here that the model has seen them.",
}


def probe_test_name(test: ProbeTest, *, capital: bool = False) -> str:
    """The probe test as a report names it ("log-probability membership test")."""
    name = _TEST_NAMES[test]
    return name[0].upper() + name[1:] if capital else name


def probe_conclusion(test: ProbeTest, *, flagged: bool) -> str:
    """The closing sentence of a probe's summary: what a flag (or none) on `test` means."""
    return (_FLAGGED if flagged else _NOT_FLAGGED)[test]

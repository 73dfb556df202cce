"""The web UI, the item commands and the token and session code hold no transaction handling of
their own: a page's route writes through the request's unit of work (`service.core.deps`) and
leaves a refusal to `service.ui.refusals`; a command writes in `write_transaction` blocks and leaves
a refusal to the command group (`service.cli`), or takes it as a result (`service.core.attempts`).
Same rule and scan as `test_unit_of_work`, over these modules."""

from __future__ import annotations

from pathlib import Path

from tests.unit.test_unit_of_work import ROOT, _offences

CORE = ("auth", "tokens", "sessions", "locks", "token_cli", "audit_cli")
MODULES = sorted(
    [
        *(ROOT / "service" / "ui").glob("*.py"),
        *(ROOT / "service" / "items").glob("*.py"),
        *(ROOT / "service" / "core" / f"{name}.py" for name in CORE),
    ]
)


def test_pages_commands_and_tokens_leave_transactions_and_refusals_to_the_unit_of_work() -> None:
    assert len(MODULES) >= 25, MODULES
    offences = [offence for path in MODULES for offence in _offences(Path(path))]
    assert not offences, "\n".join(offences)

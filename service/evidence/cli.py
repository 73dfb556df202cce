"""The evidence commands: `goldenset report temporal-split`, `goldenset report public-inflation` and
`goldenset probe`. They work on the configured database directly, with the same code as the HTTP
API (or over it with `--url`), so a probe run here is stored and shown by `GET /v1/probes/{id}` too.

Exit status: 0 when the report was made (flagged or not: evidence, not a verdict), 2 on a usage
error or a refusal that names what is missing, 3 when a sealed item reached a probe's plan (a
refused decision, `service.cli`; nothing was sent), 4 when the gate refuses a probe, 5 when a
probe ran but could not produce a report.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer
from pydantic import SecretStr, ValidationError
from rich.panel import Panel
from rich.table import Table
from sqlmodel import Session

from curation.evidence.wording import p_text
from schemas.evidence import EvidenceWarning, ProbeReport, PublicInflationReport, TemporalSplitReport
from schemas.probe_tests import ProbeTestChoice
from schemas.probes import ProbeCreate
from service.core.problems import ProblemError
from service.core.remote import read_here_or_there, remote_client
from service.core.settings import get_settings
from service.core.terminal import CLI_ACTOR, EXIT_FAILED, EXIT_REFUSED, EXIT_USAGE, chart_format, err, fail, open_engine, out, progress_bar
from service.evals.scale_cli import score_change_command
from service.evidence.probe_execution import execute_probe
from service.evidence.probes import prepare_probe, probe_read, require_probe
from service.evidence.public_inflation import public_inflation
from service.evidence.temporal_split import temporal_split

if TYPE_CHECKING:
    from goldenset_client import Client

report_app = typer.Typer(help="Contamination evidence reports, and score changes split into the set and the model.", no_args_is_help=True)
report_app.command("score-change")(score_change_command)


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value:.1%}"


def _warnings(warnings: list[EvidenceWarning]) -> None:
    for warning in warnings:
        out.print(f"[yellow]warning ({warning.code}):[/] {warning.message}", highlight=False)


def print_temporal_split(report: TemporalSplitReport) -> None:
    """The report as a person reads it: the halves, the gap with its interval and p-value, the
    warnings, the summary and the statement of what the evidence is and is not."""
    table = Table("half", "items", f"mean {report.score_name}", "human success", "dated", title=f"{report.model} on {report.corpus}, cutoff {report.cutoff}")
    for half in (report.before, report.after):
        label = "before cutoff" if half.label == "before_cutoff" else "on or after cutoff"
        human = f"{_pct(half.human_success_rate)} (n = {half.human_n})" if half.human_n else "—"
        table.add_row(label, str(half.n), f"{half.mean_score:.3f}", human, f"{half.first_occurred_at:%Y-%m-%d} … {half.last_occurred_at:%Y-%m-%d}")
    out.print(table)
    verdict = "[bold red]flagged[/]" if report.flagged else "[green]not flagged[/]"
    out.print(
        f"difference {report.difference * 100:+.1f} points, 95% interval [{report.interval.low * 100:+.1f}, {report.interval.high * 100:+.1f}], "
        f"permutation {p_text(report.p_value)}: {verdict} (alpha {report.alpha}); smallest gap this data detects with 80% power: "
        f"{report.minimum_detectable_difference * 100:.1f} points",
        highlight=False,
    )
    _warnings(report.warnings)
    out.print(report.summary, highlight=False)
    out.print(Panel(report.statement, title="what this is, and what to do", border_style="cyan"), highlight=False)


def print_probe(report: ProbeReport) -> None:
    """A probe report: per metric the bands' medians, the gap, the share above the control's 95th
    percentile beside the share expected there by chance at the items' lengths, and both p-values;
    then warnings, summary and statement."""
    columns = ("metric", "pre-cutoff median", "control median", "gap", "above control p95", "by chance at their lengths", "Mann–Whitney p", "length-matched p", "flagged")
    table = Table(*columns, title=(
        f"{report.model} on {report.dataset} ({report.split}), {report.test.value} test"
        + (f" against {report.reference_model}" if report.reference_model else "")
        + f": {report.n_pre_cutoff} pre-cutoff items, {report.n_control} control items"
        + (f" ({report.n_control_near_pre_cutoff} more left out as near copies of older items)" if report.n_control_near_pre_cutoff else "")
        + f", cutoff {report.cutoff}"
    ))
    for metric in report.metrics:
        flag = "[bold red]yes[/]" if metric.flagged else "no"
        table.add_row(
            metric.metric.value, f"{metric.pre_median:.3f}", f"{metric.control_median:.3f}", f"{metric.median_gap:+.3f}",
            f"{metric.share_above_control_p95:.0%}", _share(metric.expected_share_length_matched), f"{metric.p_value:.2g}", f"{metric.length_matched_p_value:.2g}", flag,
        )  # fmt: skip
    out.print(table)
    out.print(report.test_sees, style="dim", highlight=False)
    _warnings(report.warnings)
    out.print(report.summary, highlight=False)
    out.print(Panel(report.statement, title="what this is, and what to do", border_style="cyan"), highlight=False)


def _share(value: float | None) -> str:
    return "—" if value is None else f"{value:.0%}"


def print_public_inflation(report: PublicInflationReport) -> None:
    """The report as a person reads it: the reference models and the target on both sides, the
    difference with its interval and p-value, the warnings, the summary and the statement."""
    table = Table("model", f"private ({report.eval})", f"public ({report.corpus})", "from the line", title=f"{report.model} on {report.corpus} against {report.eval}")
    for reference in report.references:
        table.add_row(reference.model, f"{reference.private_score:.3f}", f"{reference.public_score:.3f}", f"{reference.difference_from_others * 100:+.1f} points")
    table.add_row(f"[bold]{report.model}[/]", f"{report.private_score:.3f}", f"{report.public_score:.3f}", f"[bold]{report.difference * 100:+.1f} points[/]")
    out.print(table)
    verdict = "[bold red]flagged[/]" if report.flagged else "[green]not flagged[/]"
    out.print(
        f"predicted public score {report.predicted_public_score:.3f} from {len(report.references)} reference models; difference "
        f"{report.difference * 100:+.1f} points, {report.interval.level:.0%} interval [{report.interval.low * 100:+.1f}, {report.interval.high * 100:+.1f}], "
        f"one-sided {p_text(report.p_value)}: {verdict} (alpha {report.alpha}); {report.private_items} private and {report.public_items} public items",
        highlight=False,
    )
    _warnings(report.warnings)
    out.print(report.summary, highlight=False)
    out.print(Panel(report.statement, title="what this is, and what to do", border_style="cyan"), highlight=False)


def _output(report: TemporalSplitReport | ProbeReport | PublicInflationReport, *, as_json: bool, chart: Path | None, image_format: Literal["svg", "png"] | None) -> None:
    """Print the report (as JSON, or for a person), and write its chart when one was asked for."""
    if as_json:
        typer.echo(report.model_dump_json(indent=2))
    elif isinstance(report, ProbeReport):
        print_probe(report)
    elif isinstance(report, PublicInflationReport):
        print_public_inflation(report)
    else:
        print_temporal_split(report)
    if chart is not None and image_format is not None:
        from curation.evidence import charts  # matplotlib loads only when a chart is asked for

        if isinstance(report, ProbeReport):
            image = charts.probe_chart(report, image_format=image_format)
        elif isinstance(report, PublicInflationReport):
            image = charts.public_inflation_chart(report, image_format=image_format)
        else:
            image = charts.temporal_split_chart(report, image_format=image_format)
        chart.write_bytes(image)
        err.print(f"chart written to {chart}")


@report_app.command("temporal-split")
def temporal_split_command(
    model: Annotated[str, typer.Option("--model", help="A registered model with a training cutoff.")],
    eval: Annotated[str | None, typer.Option("--eval", help="An eval: the results of its runs.")] = None,
    corpus: Annotated[str | None, typer.Option("--corpus", help="A public corpus: the results uploaded for the model.")] = None,
    chart: Annotated[Path | None, typer.Option("--chart", help="Also write the chart here (.svg or .png).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON instead.")] = False,
) -> None:
    """The model's score before versus after its training cutoff: evidence about one score, not a verdict."""
    image_format = chart_format(chart) if chart is not None else None
    report = read_here_or_there(
        lambda client: client.temporal_split(model, eval_name=eval, corpus=corpus),
        lambda session: temporal_split(session=session, model_name=model, eval_name=eval, corpus_name=corpus),
        TemporalSplitReport,
    )
    _output(report, as_json=as_json, chart=chart, image_format=image_format)


@report_app.command("public-inflation")
def public_inflation_command(
    eval: Annotated[str, typer.Option("--eval", help="The private eval: every model's results in its dev runs.")],
    corpus: Annotated[str, typer.Option("--corpus", help="A registered public corpus: the results uploaded for each model.")],
    model: Annotated[str, typer.Option("--model", help="The registered model whose public score is in question.")],
    chart: Annotated[Path | None, typer.Option("--chart", help="Also write the chart here (.svg or .png).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON instead.")] = False,
) -> None:
    """Is the model's public score higher than its private eval score predicts, against other models? Evidence about one score, not a verdict."""
    image_format = chart_format(chart) if chart is not None else None
    report = read_here_or_there(
        lambda client: client.public_inflation(model, eval_name=eval, corpus=corpus),
        lambda session: public_inflation(session=session, eval_name=eval, corpus_name=corpus, model_name=model),
        PublicInflationReport,
    )
    _output(report, as_json=as_json, chart=chart, image_format=image_format)


def probe_command(
    model: Annotated[str, typer.Option("--model", help="A registered model with a training cutoff.")],
    endpoint: Annotated[str, typer.Option("--endpoint", help="A registered endpoint serving the model.")],
    eval: Annotated[str | None, typer.Option("--eval", help="Probe this eval's dev items (never sealed ones).")] = None,
    corpus: Annotated[str | None, typer.Option("--corpus", help="Probe this public corpus instead.")] = None,
    release: Annotated[str, typer.Option("--release", help="A release number, or latest.")] = "latest",
    limit: Annotated[int | None, typer.Option("--limit", min=4, help="Probe at most N items, half each side of the cutoff.")] = None,
    allow_exposure: Annotated[bool, typer.Option("--allow-exposure", help="Send an eval's items to an endpoint that fails the gate; they are marked exposed.")] = False,
    api_key_env: Annotated[str | None, typer.Option("--api-key-env", help="Variable holding the API key (default GOLDENSET_ENDPOINT_KEY_<ENDPOINT>).")] = None,
    concurrency: Annotated[int, typer.Option("--concurrency", min=1, max=64, help="Requests in flight.")] = 4,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds per request attempt.")] = 60.0,
    test: Annotated[ProbeTestChoice, typer.Option("--test", help="completion, logprob, reference_logprob, or auto: the strongest the endpoints allow.")] = ProbeTestChoice.AUTO,
    reference_endpoint: Annotated[str | None, typer.Option("--reference-endpoint", help="The reference test's endpoint (it must give log-probabilities).")] = None,
    reference_model: Annotated[str | None, typer.Option("--reference-model", help="The model the reference endpoint serves (default: its registered one).")] = None,
    chart: Annotated[Path | None, typer.Option("--chart", help="Also write the chart here (.svg or .png).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON instead.")] = False,
) -> None:
    """Probe a model for memorised items with the strongest test its endpoint allows (or --test), against the control band."""
    image_format = chart_format(chart) if chart is not None else None
    api_key: SecretStr | None = None
    if api_key_env is not None:
        if not os.environ.get(api_key_env):
            raise fail(f"--api-key-env {api_key_env}: that environment variable is not set")
        api_key = SecretStr(os.environ[api_key_env])
    try:
        data = ProbeCreate(
            eval=eval, corpus=corpus, release=int(release) if release.isdigit() else release, model=model, endpoint=endpoint, limit=limit,
            allow_exposure=allow_exposure, api_key=api_key, concurrency=concurrency, timeout_seconds=timeout,
            test=test, reference_endpoint=reference_endpoint, reference_model=reference_model,
        )  # fmt: skip
    except ValidationError as exc:
        raise fail("; ".join(str(error["msg"]).removeprefix("Value error, ") for error in exc.errors())) from exc
    with remote_client() as client:
        if client is not None:
            _output(remote_probe(client, data), as_json=as_json, chart=chart, image_format=image_format)
            return
    engine = open_engine()
    try:
        prepared = prepare_probe(engine=engine, data=data, actor=CLI_ACTOR, terms_max_age_days=get_settings().terms_max_age_days)
    except ProblemError as exc:
        condition = exc.extra.get("condition")
        raise fail(f"{exc.detail}" + (f" (condition: {condition})" if condition else ""), EXIT_REFUSED if exc.status == 403 else EXIT_USAGE) from exc
    source = {"request": "--api-key-env", "environment": prepared.key_variable, "none": "none"}[prepared.api_key_from]
    against = f" and {prepared.reference.name}" if prepared.reference is not None else ""
    err.print(f"probe {prepared.probe_id}, {prepared.test.value} test: {prepared.requests} requests to {endpoint}{against} (API key: {source})", highlight=False)
    stop = threading.Event()
    result: list[ProbeReport | None] = []
    with progress_bar(remaining=True) as progress:
        task = progress.add_task("probing", total=prepared.requests)
        worker = threading.Thread(
            target=lambda: result.append(execute_probe(engine, prepared, stop=stop, progress=lambda done, _: progress.update(task, completed=done))), daemon=True
        )
        worker.start()
        try:
            while worker.is_alive():
                worker.join(timeout=0.2)
        except KeyboardInterrupt:
            stop.set()
            worker.join()
    report = result[0] if result else None
    if report is None:
        with Session(engine) as session:
            shown = probe_read(session, require_probe(session=session, probe_id=prepared.probe_id))
        raise fail(f"probe {prepared.probe_id} failed: {shown.error}", EXIT_FAILED)
    _output(report, as_json=as_json, chart=chart, image_format=image_format)


def remote_probe(client: Client, data: ProbeCreate, *, poll_seconds: float = 0.5) -> ProbeReport:
    """Start the probe on the service (which calls the endpoint, with the key sent or its own)
    and wait for its report; a failed probe ends the command (exit 5)."""
    import time

    import goldenset_client.models as api

    body = data.model_dump(mode="json", exclude_none=True)
    for field, secret in (("api_key", data.api_key), ("reference_api_key", data.reference_api_key)):
        if secret is not None:
            body[field] = secret.get_secret_value()
    probe = client.start_probe(api.ProbeCreate.model_validate(body))
    err.print(f"probe {probe.id}, {probe.test} test: {probe.total} requests to {data.endpoint}, run by the service", highlight=False)
    while probe.status not in ("done", "failed"):
        time.sleep(poll_seconds)
        probe = client.get_probe(probe.id)
    if probe.status == "failed" or probe.report is None:
        raise fail(f"probe {probe.id} failed: {probe.error}", EXIT_FAILED)
    return ProbeReport.model_validate(probe.report.model_dump(mode="json"))


def register(app: typer.Typer) -> None:
    """Add `report temporal-split`, `report public-inflation` and `probe` to the main app."""
    app.add_typer(report_app, name="report")
    app.command("probe")(probe_command)

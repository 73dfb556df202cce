"""`goldenset scale` (refit an eval's common scale now, show it) and `goldenset report score-change`
(a score change split into the set and the model), on the database or, where the API serves it,
over `--url` (`service.evals.scale`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table
from sqlmodel import Session

from schemas.scale import EvalScale, ScaleEstimate, ScoreChangePart, ScoreChangeReport
from service.core.problems import ProblemError
from service.core.remote import read_here_or_there
from service.core.terminal import chart_format, err, fail, open_engine, out
from service.evals.definitions import require_eval
from service.evals.scale import eval_scale, refit, score_change_report

if TYPE_CHECKING:
    from curation.evidence.charts import ImageFormat

scale_app = typer.Typer(help="The common scale of an eval's releases: refit it now, show it.", no_args_is_help=True)


def _interval(found: ScaleEstimate, digits: int = 1) -> str:
    return f"{found.value:.{digits}f} [{found.low:.{digits}f}, {found.high:.{digits}f}]"


def print_scale(scale: EvalScale) -> None:
    """The scale as tables: releases with their difficulty index, runs with ability and equated score."""
    stale = " (stale: newer results wait for the next refit)" if scale.stale else ""
    out.print(f"eval {scale.eval}: scale version {scale.version}, fitted {scale.fitted_at:%Y-%m-%d %H:%M} UTC on {scale.observations} results{stale}", highlight=False)
    releases = Table("release", "scored items", "difficulty index [95%]", title="Releases (the mean model's expected score; lower is harder)")
    for release in scale.releases:
        releases.add_row(str(release.number), str(release.items), _interval(release.difficulty_index))
    out.print(releases)
    runs = Table("run", "model", "release", "mean score", "ability [95%]", f"equated on release {scale.reference_release} [95%]", title="Runs")
    for run in scale.runs:
        runs.add_row(str(run.id), run.model, str(run.release), f"{run.mean_score:.1f}", _interval(run.ability, 2), _interval(run.equated_score))
    out.print(runs)
    out.print(scale.note, highlight=False)


@scale_app.command("refit")
def refit_command(eval: Annotated[str, typer.Option("--eval", help="The eval whose scale to fit.")]) -> None:
    """Fit the eval's scale now over its dev runs' per-item results (the scheduler does it every
    GOLDENSET_SCALE_REFIT_SECONDS when results are newer), and store it as the next version."""
    engine = open_engine()
    with Session(engine) as session:
        try:
            evaluation = require_eval(session=session, name=eval)
        except ProblemError as exc:
            raise fail(exc.detail) from exc
    fit = refit(engine, evaluation=evaluation)
    if fit is None:
        raise fail(f"eval {eval!r} has no per-item results of dev runs yet: post results to its runs first")
    err.print(f"eval {eval}: scale version {fit.version} fitted on {fit.observations} results", highlight=False)


def _write_chart(chart: Path, image_format: ImageFormat, draw: Callable[[ImageFormat], bytes]) -> None:
    chart.write_bytes(draw(image_format))
    err.print(f"chart written to {chart}", highlight=False)


@scale_app.command("show")
def show_command(
    eval: Annotated[str, typer.Option("--eval", help="The eval whose scale to show.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print it as JSON instead.")] = False,
    chart: Annotated[Path | None, typer.Option("--chart", help="Also write the chart here (.svg or .png).")] = None,
) -> None:
    """The eval's newest scale: releases with their difficulty index, runs with ability and equated score."""
    image_format = chart_format(chart) if chart is not None else None
    scale = read_here_or_there(lambda client: client.eval_scale(eval), lambda session: eval_scale(session, require_eval(session=session, name=eval)), EvalScale)
    if as_json:
        out.print_json(scale.model_dump_json())
    else:
        print_scale(scale)
    if chart is not None and image_format is not None:
        from curation.scale.charts import scale_chart  # matplotlib loads only when a chart is asked for

        _write_chart(chart, image_format, lambda chosen: scale_chart(scale, image_format=chosen))


def _part(name: str, part: ScoreChangePart) -> str:
    verdict = "its interval excludes 0" if part.excludes_zero else "its interval includes 0"
    return f"{name}: {part.value:+.1f} points [{part.low:+.1f}, {part.high:+.1f}] ({verdict})"


def score_change_command(
    run_a: Annotated[int, typer.Option("--run-a", help="The first run.")],
    run_b: Annotated[int, typer.Option("--run-b", help="The second run.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON instead.")] = False,
    chart: Annotated[Path | None, typer.Option("--chart", help="Also write the chart here (.svg or .png).")] = None,
) -> None:
    """Run B's score minus run A's, split into the part due to the set and the part due to the model."""
    image_format = chart_format(chart) if chart is not None else None
    report = read_here_or_there(lambda client: client.score_change(run_a, run_b), lambda session: score_change_report(session, run_a=run_a, run_b=run_b), ScoreChangeReport)
    if chart is not None and image_format is not None:
        from curation.scale.charts import score_change_chart

        _write_chart(chart, image_format, lambda chosen: score_change_chart(report, image_format=chosen))
    if as_json:
        out.print_json(report.model_dump_json())
        return
    first, second = report.run_a, report.run_b
    out.print(f"eval {report.eval}, scale version {report.fit_version}", highlight=False)
    for run in (first, second):
        out.print(f"run {run.id} ({run.model}, release {run.release}): mean score {run.mean_score:.1f}", highlight=False)
    out.print(f"observed change {report.observed_change:+.1f} points", highlight=False)
    for name, part in (("expected change", report.total), ("due to the set", report.set), ("due to the model", report.model)):
        out.print(_part(name, part), highlight=False)
    out.print(report.wording, highlight=False)


def register(app: typer.Typer) -> None:
    """Add `scale` to the `goldenset` app (`report score-change` is registered with the reports)."""
    app.add_typer(scale_app, name="scale")

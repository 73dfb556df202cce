"""The runs pages on both backends, over runs started and scored through the API: several models,
two releases, dev and sealed runs. The runs page, the model page and their downloads show the
numbers `GET /v1/runs/{id}` gives; the comparison's paired difference is the one computed from the
API's per-item results; no page or download shows a sealed item's id or text; and every page
needs `read`, as the API's run routes do."""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from html import unescape
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from schemas.item import Item
from schemas.model_registry import TrainsOnInputs
from service.core.sessions import LOGIN_CSRF_COOKIE
from service.evals.refresh import refresh_eval
from service.runs.paired import paired_difference
from tests.conftest import TEST_SECRET_KEY
from tests.run_support import REFRESH_AT, auth, register, released_eval, token

SLASHED = "acme/m3"


@dataclass(frozen=True)
class Seeded:
    """The runs started, by label; the released item ids of each split; a reader's API headers."""

    runs: dict[str, int]
    dev: list[int]
    sealed: list[int]
    headers: dict[str, str]


@pytest.fixture
def client(app: FastAPI) -> Iterator[TestClient]:
    with TestClient(app, follow_redirects=False) as test_client:
        yield test_client


def _start(client: TestClient, headers: dict[str, str], model: str, release: int, split: str = "dev") -> tuple[int, list[int]]:
    started = client.post("/v1/evals/ops/runs", json={"model": model, "endpoint": f"{model}-no", "release": release, "split": split}, headers=headers)
    assert started.status_code == 201, started.text
    body = started.json()
    return body["id"], sorted(item["item_id"] for item in body["items"])


def _score(client: TestClient, headers: dict[str, str], run_id: int, scores: dict[int, float]) -> None:
    answer = client.post(f"/v1/runs/{run_id}/results", json={"results": [{"item_id": i, "score": s} for i, s in scores.items()]}, headers=headers)
    assert answer.status_code == 200, answer.text


def seed(engine: Engine, client: TestClient) -> Seeded:
    """Release 1 of eval `ops`; models m1, m2 and acme/m3, each with an endpoint that does not
    train on inputs. On release 1: m1 dev (scores 0 or 1: Wilson), m2 dev (fractions: the
    bootstrap), m1 sealed. Then release 2: m1 dev with half its items scored, m2 dev unscored,
    acme/m3 dev scored 0.5 throughout."""
    released = released_eval(engine, count=30, budget=3)
    for model in ("m1", "m2", SLASHED):
        register(engine, model=model, endpoints={f"{model}-no": TrainsOnInputs.NO})
    owner = auth(token(engine, "read", "sealed", name="pipeline"))
    runs: dict[str, int] = {}
    runs["m1-1"], items = _start(client, owner, "m1", 1)
    _score(client, owner, runs["m1-1"], {i: 1.0 if i % 3 else 0.0 for i in items})
    runs["m2-1"], items = _start(client, owner, "m2", 1)
    _score(client, owner, runs["m2-1"], {i: (i % 7) / 6 for i in items})
    runs["m1-1-sealed"], sealed_items = _start(client, owner, "m1", 1, "sealed")
    assert sealed_items == released.sealed and sealed_items
    _score(client, owner, runs["m1-1-sealed"], {i: 1.0 if i % 2 else 0.0 for i in sealed_items})
    assert refresh_eval(engine, name="ops", at=REFRESH_AT + timedelta(days=31), secret_key=TEST_SECRET_KEY, actor="test").release.number == 2
    runs["m1-2"], items = _start(client, owner, "m1", 2)
    _score(client, owner, runs["m1-2"], {i: 1.0 if i % 2 else 0.0 for i in items[: len(items) // 2]})
    runs["m2-2"], _ = _start(client, owner, "m2", 2)
    runs["m3-2"], items = _start(client, owner, SLASHED, 2)
    _score(client, owner, runs["m3-2"], dict.fromkeys(items, 0.5))
    return Seeded(runs, released.dev, released.sealed, auth(token(engine, "read", name="api-reader")))


def sign_in(client: TestClient, engine: Engine, *scopes: str) -> None:
    client.get("/ui/login")
    answer = client.post("/ui/login", data={"token": token(engine, *scopes), "csrf": client.cookies[LOGIN_CSRF_COOKIE]})
    assert answer.status_code == 303, answer.text


def _api(client: TestClient, seeded: Seeded, path: str) -> Any:
    answer = client.get(path, headers=seeded.headers)
    assert answer.status_code == 200, answer.text
    return answer.json()


def _row(html: str, run_id: int) -> str:
    found = re.search(rf'<tr id="run-{run_id}".*?</tr>', html, re.S)
    assert found, f"run {run_id} is not listed"
    return found.group(0)


def _shown_score(row: str) -> dict[str, str]:
    return dict(re.findall(r'data-(mean|low|high)="([^"]+)"', row))


def _expected_score(summary: dict[str, Any]) -> dict[str, str]:
    score = summary["score"]
    if score["mean"] is None:
        return {}
    return {key: str(score[key]) for key in ("mean", "low", "high") if score[key] is not None}


def _csv(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def _get(client: TestClient, url: str, status: int = 200) -> str:
    answer = client.get(url)
    assert answer.status_code == status, f"{url}: {answer.status_code} {answer.text[:300]}"
    return answer.text


def test_the_runs_page_and_its_csv_show_each_run_as_the_api_summarises_it(client: TestClient, engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    seeded = seed(engine, client)
    sign_in(client, engine, "read")
    html = _get(client, "/ui/runs")
    assert '<a href="/ui/runs" aria-current="page">Runs</a>' in html
    for label, run_id in seeded.runs.items():
        summary = _api(client, seeded, f"/v1/runs/{run_id}")
        row = _row(html, run_id)
        assert _shown_score(row) == _expected_score(summary), label
        model_link = f'href="/ui/models/{summary["model"]}"'
        assert model_link in row and f">{summary['endpoint']}<" in row and f'data-split="{summary["split"]}"' in row
        assert f"{summary['scored']} of {summary['item_count']}" in row
        assert f"/releases/{summary['release']}\">{summary['release']}</a>" in row
        if summary["score"]["mean"] is not None:
            assert f"{summary['score']['mean']:.3f}" in row and f"[{summary['score']['low']:.3f}, {summary['score']['high']:.3f}]" in row
    statuses = {label: re.findall(r"<td>([a-z ]+)</td>\s*</tr>", _row(html, run_id))[0] for label, run_id in seeded.runs.items()}
    assert statuses == {"m1-1": "scored", "m2-1": "scored", "m1-1-sealed": "scored", "m1-2": "partly scored", "m2-2": "awaiting results", "m3-2": "scored"}
    # Newest first.
    listed = [int(run_id) for run_id in re.findall(r'<tr id="run-(\d+)"', html)]
    assert listed == sorted(seeded.runs.values(), reverse=True)

    rows = _csv(_get(client, "/ui/runs.csv?eval=ops"))
    assert [int(line["run_id"]) for line in rows] == listed
    for line in rows:
        summary = _api(client, seeded, f"/v1/runs/{line['run_id']}")
        score = summary["score"]
        assert (line["model"], line["endpoint"], int(line["release"]), line["split"]) == (summary["model"], summary["endpoint"], summary["release"], summary["split"])
        assert (int(line["scored"]), int(line["item_count"]), line["method"]) == (summary["scored"], summary["item_count"], score["method"])
        for key in ("mean", "low", "high"):
            assert (float(line[key]) if line[key] else None) == score[key]

    only_m2 = _get(client, "/ui/runs?eval=ops&model=m2")
    assert re.findall(r'<tr id="run-(\d+)"', only_m2) == [str(seeded.runs["m2-2"]), str(seeded.runs["m2-1"])]
    monkeypatch.setattr("service.ui.runs.PAGE_SIZE", 4)
    first = _get(client, "/ui/runs?eval=ops")
    second = _get(client, "/ui/runs?eval=ops&page=2")
    assert "page 1 of 2" in first and 'href="/ui/runs?eval=ops&amp;page=2" rel="next"' in first
    assert re.findall(r'<tr id="run-(\d+)"', first) + re.findall(r'<tr id="run-(\d+)"', second) == [str(run_id) for run_id in listed]
    assert _get(client, "/ui/runs?eval=nope", 404).count("No such eval")


def test_the_model_page_shows_its_terms_history_chart_and_downloads(client: TestClient, engine: Engine) -> None:
    seeded = seed(engine, client)
    sign_in(client, engine, "read")
    html = _get(client, "/ui/models/m1")
    assert "<h1>Model m1</h1>" in html and "2023-12-01" in html and "m1-no" in html and "30 days" in html
    history = html[html.index('id="history-ops"') :]
    m1_runs = [seeded.runs[label] for label in ("m1-1", "m1-1-sealed", "m1-2")]
    assert [int(run_id) for run_id in re.findall(r'<tr id="run-(\d+)"', history)] == m1_runs
    for run_id in m1_runs:
        assert _shown_score(_row(history, run_id)) == _expected_score(_api(client, seeded, f"/v1/runs/{run_id}"))
    chart = re.search(r'<svg [^>]*role="img".*?</svg>', history, re.S)
    assert chart and "Mean score of m1 on ops by release" in chart.group(0)
    points = re.findall(r'<g class="point" data-split="(\w+)">', chart.group(0))
    assert sorted(points) == ["dev", "dev", "sealed"]
    assert 'href="/ui/runs?eval=ops&amp;model=m1"' in html and 'href="/ui/runs/compare?eval=ops&amp;a=m1"' in html

    slashed = _get(client, f"/ui/models/{SLASHED}")
    assert f"<h1>Model {SLASHED}</h1>" in slashed and str(seeded.runs["m3-2"]) in slashed
    assert f'href="/ui/models/{SLASHED}"' in _get(client, "/ui/runs")

    results = _csv(_get(client, "/ui/models/m1/results.csv"))
    expected = [
        (run_id, entry["item_id"], entry["score"]) for run_id in (seeded.runs["m1-1"], seeded.runs["m1-2"]) for entry in _api(client, seeded, f"/v1/runs/{run_id}/results")
    ]
    assert [(int(row["run_id"]), int(row["item_id"]), float(row["score"])) for row in results] == expected
    assert {row["endpoint"] for row in results} == {"m1-no"} and {row["release"] for row in results} == {"1", "2"}

    downloaded = json.loads(_get(client, "/ui/models/m1/runs.json"))
    assert downloaded["model"]["name"] == "m1"
    assert downloaded["runs"] == [_api(client, seeded, f"/v1/runs/{run_id}") for run_id in sorted(m1_runs, reverse=True)]
    assert _get(client, "/ui/models/nobody", 404).count("No such model")


def _expected_pairs(client: TestClient, seeded: Seeded, a_runs: list[str], b_runs: list[str]) -> tuple[dict[int, tuple[float, float]], int, int]:
    """Per item both scored: (a's score, b's score) from each model's latest run that scored it;
    and the items only a, only b scored. Item content is the same in both releases here, so
    pairing by id is pairing by id and content."""

    def latest(labels: list[str]) -> dict[int, float]:
        scores: dict[int, float] = {}
        for run_id in sorted(seeded.runs[label] for label in labels):
            scores.update((entry["item_id"], entry["score"]) for entry in _api(client, seeded, f"/v1/runs/{run_id}/results"))
        return scores

    a, b = latest(a_runs), latest(b_runs)
    both = sorted(a.keys() & b.keys())
    return {item_id: (a[item_id], b[item_id]) for item_id in both}, len(a) - len(both), len(b) - len(both)


def _figure(html: str, name: str) -> str:
    found = re.search(rf'data-figure="{name}"[^>]*>(.*?)</td>', html, re.S)
    assert found, name
    return " ".join(found.group(1).split())


@pytest.mark.parametrize(
    ("query", "a_runs", "b_runs"),
    [
        ("eval=ops&a=m1&b=m2&release=1", ["m1-1"], ["m2-1"]),
        ("eval=ops&a=m1&b=m2", ["m1-1", "m1-2"], ["m2-1", "m2-2"]),
        ("eval=ops&a=acme/m3&b=m1&release=2", ["m3-2"], ["m1-2"]),
    ],
)
def test_the_comparison_is_the_paired_difference_of_the_apis_per_item_results(client: TestClient, engine: Engine, query: str, a_runs: list[str], b_runs: list[str]) -> None:
    seeded = seed(engine, client)
    sign_in(client, engine, "read")
    pairs, only_a, only_b = _expected_pairs(client, seeded, a_runs, b_runs)
    expected = paired_difference([a for a, _ in pairs.values()], [b for _, b in pairs.values()])
    html = _get(client, f"/ui/runs/compare?{query}")
    assert _figure(html, "n") == str(len(pairs)) and len(pairs) > 1
    assert (_figure(html, "only_a"), _figure(html, "only_b")) == (str(only_a), str(only_b))
    shown = re.search(r'data-figure="difference"([^>]*)>', html)
    assert shown and dict(re.findall(r'data-(mean|low|high)="([^"]+)"', shown.group(1))) == {
        "mean": str(expected.mean_difference),
        "low": str(expected.low),
        "high": str(expected.high),
    }
    assert f"{expected.mean_difference:+.3f}" in _figure(html, "difference")
    rows = _csv(_get(client, f"/ui/runs/compare.csv?{query}"))
    assert {int(row["item_id"]): (float(row["score_a"]), float(row["score_b"])) for row in rows} == pairs
    assert all(float(row["difference"]) == pytest.approx(float(row["score_a"]) - float(row["score_b"])) for row in rows)


def test_a_comparison_asked_wrongly_says_what_to_fix(client: TestClient, engine: Engine) -> None:
    seed(engine, client)
    sign_in(client, engine, "read")
    assert 'data-figure="n"' not in _get(client, "/ui/runs/compare")
    same = _get(client, "/ui/runs/compare?eval=ops&a=m1&b=m1", 422)
    assert "choose a model other than a" in same and 'aria-invalid="true"' in same
    assert "has no release &#39;9&#39;" in _get(client, "/ui/runs/compare?eval=ops&a=m1&b=m2&release=9", 422)
    assert "no registered model called &#39;nobody&#39;" in _get(client, "/ui/runs/compare?eval=ops&a=nobody&b=m2", 422)
    assert "choose the eval to compare them on" in _get(client, "/ui/runs/compare?a=m1&b=m2", 422)
    assert "Nothing to download" in _get(client, "/ui/runs/compare.csv?eval=ops&a=m1", 422)


def _sealed_texts(engine: Engine, sealed: list[int], dev: list[int]) -> list[str]:
    """Pieces of the sealed items' text that no dev item shares."""
    with Session(engine) as session:
        items = {item.id: item for item in session.exec(select(Item).where(col(Item.id).in_(sealed + dev)))}
    open_text = "\n".join(f"{items[i].external_id}\n{items[i].title}\n{items[i].input}" for i in dev)
    pieces = [piece for i in sealed for piece in (items[i].external_id, items[i].title, items[i].input[:60]) if len(piece) >= 8 and piece not in open_text]
    assert pieces
    return pieces


def test_no_page_or_download_shows_a_sealed_items_id_or_text(client: TestClient, engine: Engine) -> None:
    seeded = seed(engine, client)
    sign_in(client, engine, "read", "sealed")
    pages = ["/ui/runs", "/ui/runs?eval=ops", "/ui/runs?eval=ops&model=m1", "/ui/models/m1", "/ui/runs/compare?eval=ops&a=m1&b=m2", "/ui/runs/compare?eval=ops&a=m1&b=m2&release=1"]
    tables = ["/ui/runs.csv", "/ui/models/m1/results.csv", "/ui/runs/compare.csv?eval=ops&a=m1&b=m2", "/ui/runs/compare.csv?eval=ops&a=m1&b=m2&release=1"]
    bodies = {url: unescape(_get(client, url)) for url in [*pages, *tables, "/ui/models/m1/runs.json"]}
    leaks = [(url, piece[:30]) for url, body in bodies.items() for piece in _sealed_texts(engine, seeded.sealed, seeded.dev) if piece in body]
    assert not leaks
    for url in tables:
        ids = {int(row["item_id"]) for row in _csv(bodies[url]) if "item_id" in row}
        assert not ids & set(seeded.sealed), url
    assert {int(row["item_id"]) for row in _csv(bodies["/ui/models/m1/results.csv"])} == set(seeded.dev)
    assert '"item_id"' not in bodies["/ui/models/m1/runs.json"]
    for url in pages:
        assert not set(map(int, re.findall(r"/ui/items/(\d+)", bodies[url]))) & set(seeded.sealed), url
    # The sealed run itself shows its aggregate score, as GET /v1/runs/{id} gives it to a reader.
    sealed_row = _row(bodies["/ui/runs"], seeded.runs["m1-1-sealed"])
    assert _shown_score(sealed_row) == _expected_score(_api(client, seeded, f"/v1/runs/{seeded.runs['m1-1-sealed']}"))


def test_every_page_and_download_needs_read_as_the_api_does(client: TestClient, engine: Engine) -> None:
    seeded = seed(engine, client)
    urls = [
        "/ui/runs",
        "/ui/runs.csv",
        "/ui/models/m1",
        "/ui/models/m1/results.csv",
        "/ui/models/m1/runs.json",
        "/ui/runs/compare?eval=ops&a=m1&b=m2",
        "/ui/runs/compare.csv?eval=ops&a=m1&b=m2",
    ]
    anonymous = client.get("/ui/runs")
    assert anonymous.status_code == 303 and anonymous.headers["location"].startswith("/ui/login")
    sign_in(client, engine, "curate", "ingest")
    for url in urls:
        refused = _get(client, url, 403)
        assert "Reading runs and their scores needs a token with the &#39;read&#39; scope" in refused and "<html" in refused.lower(), url
    assert client.get(f"/v1/runs/{seeded.runs['m1-1']}", headers=auth(token(engine, "curate", "ingest"))).status_code == 403

"""An eval pipeline through goldenset's Python client: run a trivial model over a release's dev
split, score it, post the scores, and print the summary with its confidence interval.

The "model" answers each incident with its title; the score is the share of the reference
answer's words that the answer contains (a number in [0, 1]). Swap `answer` and `score` for a
real model call and grader.

    # against `make run` (sample incidents ingested), with an admin token for the one-off setup:
    goldenset token create --name pipeline --scopes admin
    python examples/eval_pipeline.py --token <token> --setup

The service is GOLDENSET_URL, else http://127.0.0.1:$PORT (the port `make run` serves on, 8000
when PORT is unset); `--url` names another.

`--setup` creates what is missing: the eval (over `--source`, items admitted as dedup keeps them),
its first release, the model and an endpoint whose terms say it does not train on inputs.
Without it, the eval, model and endpoint must exist and a read token is enough. Needs only the
client distribution: `pip install ./clients/python` (goldenset-client).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from typing import Any

from goldenset_client import Client, EndpointCreate, EvalCreate, GoldensetError, ModelCreate, ResultIn

WORD = re.compile(r"[a-z0-9]+")


def default_url() -> str:
    """GOLDENSET_URL, else the port `make run` serves on: http://127.0.0.1:$PORT (8000 without PORT)."""
    return os.environ.get("GOLDENSET_URL") or f"http://127.0.0.1:{os.environ.get('PORT') or 8000}"


def answer(content: dict[str, Any]) -> str:
    """The trivial model: answer with the incident's title."""
    return str(content.get("title", ""))


def score(output: str, reference: str) -> float:
    """Share of the reference's distinct words found in the output, in [0, 1]."""
    wanted = set(WORD.findall(reference.lower()))
    if not wanted:
        return 0.0
    return len(wanted & set(WORD.findall(output.lower()))) / len(wanted)


def setup(client: Client, args: argparse.Namespace) -> None:
    """Create the eval, its first release, the model and the endpoint when missing (admin)."""
    if args.eval not in {evaluation.name for evaluation in client.list_evals()}:
        client.create_eval(EvalCreate(name=args.eval, sources=[args.source], approval_policy="auto", max_age_days=None, sealed_fraction=0.2))
        print(f"created eval {args.eval} over source {args.source}")
    if not client.list_releases(args.eval):
        refreshed = client.refresh(args.eval)
        print(f"wrote release {refreshed.release.number}: {refreshed.release.dev_count} dev and {refreshed.release.sealed_count} sealed items")
    if args.model not in {model.name for model in client.list_models()}:
        client.create_model(ModelCreate(name=args.model, provider="example", notes="answers with the incident title"))
    if args.endpoint not in {endpoint.name for endpoint in client.list_endpoints()}:
        client.create_endpoint(EndpointCreate(name=args.endpoint, base_url="http://127.0.0.1:9/v1", provider="example", model=args.model, trains_on_inputs="no", retention_days=0))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--url", default=default_url(), help="The service (default: $GOLDENSET_URL, else http://127.0.0.1:$PORT, port 8000 without PORT).")
    parser.add_argument("--token", default=os.environ.get("GOLDENSET_TOKEN", ""), help="A bearer token (default: $GOLDENSET_TOKEN).")
    parser.add_argument("--eval", default="cisa-kev-sample", help="The eval (`make run` creates cisa-kev-sample).")
    parser.add_argument("--source", default="cisa-kev-sample", help="With --setup: the source the eval takes.")
    parser.add_argument("--release", default="latest")
    parser.add_argument("--model", default="title-echo")
    parser.add_argument("--endpoint", default="title-echo-local")
    parser.add_argument("--setup", action="store_true", help="Create the eval, a release, the model and the endpoint if missing (admin token).")
    args = parser.parse_args(argv)
    try:
        with Client(args.url, token=args.token) as client:
            if args.setup:
                setup(client, args)
            run = client.start_run(args.eval, model=args.model, endpoint=args.endpoint, release=args.release)
            print(f"run {run.id}: {run.item_count} {run.split} items of {run.eval} release {run.release} (canary {run.canary})")
            if run.warning:
                print(f"warning: {run.warning}")
            results = [ResultIn(item_id=item.item_id, score=score(answer(item.content), str(item.content.get("reference", "")))) for item in client.iter_run_items(run.id)]
            if results:
                client.post_results(run.id, results)
            summary = client.get_run(run.id)
    except GoldensetError as exc:
        print(f"goldenset refused: {exc}", file=sys.stderr)
        return 1
    interval = summary.score
    if interval.mean is None:
        print(f"run {summary.id}: no items to score")
        return 0
    print(f"run {summary.id}: mean score {interval.mean:.3f} [{interval.low:.3f}, {interval.high:.3f}] ({interval.confidence:.0%} {interval.method}, n={interval.n})")
    print(summary.scale_line())
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Power of the contamination tests on real neural models trained from scratch here. Prints figures; not a test.

The records of one pool (`--pool`, `bench.tinylm.corpus.POOLS`) are the probed items: CISA KEV
records (`kev`, the default, on which the completion test's margin was designed) or Apache Hadoop
Jira reports (`hadoop`, measured only), cut at `--cutoff` into pre-cutoff items and the control
band. Three small GPT-2-style models are trained from scratch with one byte-level BPE tokenizer
trained on background text only (the other data sets, never the pool's: for KEV, Hadoop Jira
reports and STS headlines; for Hadoop, KEV records and the headlines):

- C (exposed): the background plus four groups of pre-cutoff items seen 1, 3, 10 and 30 times,
  each placement whole at a random point of the run; the other pre-cutoff items are unexposed;
- N (clean): the same number of training blocks, background only;
- R (reference): as N with another seed. The reference-calibrated test scores target minus
  reference on each item; its reference must not have seen the items, so R serves both targets
  (N as its own reference would be no test at all, and R keeps C's and N's tests alike). R is also
  probed as a second clean model, with N as its reference.

Near duplicates of an exposed item (KEV repeats descriptions, Jira reports duplicate) are left out of the unexposed items
and of the control band. Each model is served over loopback HTTP as an OpenAI-compatible
endpoint, and the product's own code runs against it: the completion probe (`plan_probes` →
`complete_sync` → `probe_report`) and log-probability membership scores from `/v1/completions`
echo answers. Each item is scored once; then `--draws` times, `--n` items of a band are drawn
without replacement against `--n` control items, through the report's length-matched
Mann–Whitney test: the detection rate at alpha 0.05 per exposure group on C, and the false-positive
rate on N and R; then the same with one item per cluster of near copies within the unexposed and
control bands (near copies move together in every draw). Also the verbatim share per group (greedy
continuation of the first half reproduces at least half of the rest as one run, `lcs_ratio >=
0.5`) to show memorisation happened.

One cutoff is one split of the items, and draws from its two pools all see whatever difference that
split happens to hold, so the false-positive rate is judged over repeated temporal splits: N and R
saw no item of the pool, so every quarterly cutoff from `--first-cutoff` to `--last-cutoff` splits the items
into bands neither has seen (`bench.tinylm.temporal_splits`); beside it, how far one split's rate
swings when the same scores are split at random. PASS/FAIL lines against the issue's targets (each
test's false positives over temporal splits <= 6% on both clean models, judged on the metric it
decides on; log-probability tests detect the 10x group with power >= 0.8 where the probe does not);
exit status 1 when one fails.

Models and per-item scores are cached under `var/bench/membership_power/` (keyed by the recipe and
who is exposed how often); `--retrain` trains again, `--rescore` probes and scores again,
`--reference-seed` trains another reference (results in `results-r<seed>.json`); another size
(`--layers`, `--width`, `--heads`) writes `results-<recipe>.json`; another pool `results-<pool>.json`.

Usage: PYTHONPATH=.:clients/python .venv/bin/python bench/membership_power.py [--pool kev|hadoop] [--device cpu|cuda] [--retrain] [--rescore]
       [--per-group 80] [--draws 1000] [--n 50] [--epochs 2] [--background-chars 400000] [--reference-seed 23]
       [--layers 4 --width 256 --heads 4] [--cutoff D] [--first-cutoff D] [--last-cutoff D] [--split-draws 400] [--chance-splits 100] [--chance-draws 200]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from dataclasses import asdict, replace
from datetime import date
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import DATA, ROOT
from bench.tinylm import model as lm
from bench.tinylm.corpus import GROUPS, POOLS, Design, background_texts, design
from bench.tinylm.power import TESTS, PowerRow, collapsed, draw_rates, print_table, rate_table
from bench.tinylm.scoring import completion_report, logprob_reports
from bench.tinylm.serve import LoadedModel, serve
from bench.tinylm.temporal_splits import chance_spread, clean_split_rates, quarterly_cutoffs, split_table
from curation.evidence.probe_runner import complete_sync
from curation.evidence.probing import plan_probes
from schemas.evidence import ProbeEndpoint

OUT = ROOT / "var" / "bench" / "membership_power"
SEEDS = {"C": 11, "N": 11, "R": 23}
MODELS = ("C", "N", "R")
"""Probed and scored: C, and N and R as two clean models (each the other's reference)."""
"""C and N start from the same weights; R from others. Each seed also shuffles its model's data."""


class Clock:
    """Wall time per phase, printed as it goes."""

    def __init__(self) -> None:
        self.phases: dict[str, float] = {}

    def run(self, name: str, work: Any, *args: Any, **kwargs: Any) -> Any:
        print(f"[{name}] ...", flush=True)
        started = time.perf_counter()
        result = work(*args, **kwargs)
        self.phases[name] = round(time.perf_counter() - started, 1)
        print(f"[{name}] {self.phases[name]:.1f} s", flush=True)
        return result


def cached(path: Path, clock: Clock, fresh: bool, names: tuple[str, ...], compute: Any) -> dict[str, Any]:
    """Per model of `names`, the per-item scores saved at `path`, with the time they took; those
    absent (or all, when `fresh`) computed by `compute(missing names)` and saved beside the rest."""
    saved: dict[str, Any] = {"value": {}, "phases": {}}
    if path.exists() and not fresh:
        saved = json.loads(path.read_text())
        print(f"  per-item scores of {', '.join(name for name in names if name in saved['value'])}: cached at {path.relative_to(ROOT)}")
    clock.phases.update({f"{phase} (cached)": seconds for phase, seconds in saved["phases"].items()})
    missing = tuple(name for name in names if name not in saved["value"])
    if missing:
        before = set(clock.phases)
        saved["value"].update(compute(missing))
        saved["phases"].update({phase: clock.phases[phase] for phase in set(clock.phases) - before})
        path.write_text(json.dumps(saved))
    return {name: saved["value"][name] for name in names}


def machine() -> str:
    cpuinfo = Path("/proc/cpuinfo")
    names = [line.split(":", 1)[1].strip() for line in cpuinfo.read_text().splitlines() if line.startswith("model name")] if cpuinfo.exists() else []
    return names[0] if names else platform.processor() or platform.machine()


def trained(name: str, recipe: lm.Recipe, tokenizer: Any, background: list[str], plan: Design, *, seed: int, device: str, retrain: bool) -> tuple[Any, dict[str, Any]]:
    tag = name if seed == SEEDS[name] else f"{name}{seed}"
    folder = OUT / f"model-{tag}-{recipe.key()}-{plan.key()}"
    if not retrain and (cached := lm.load(folder, device)) is not None:
        print(f"  {name}: cached at {folder.relative_to(ROOT)} (trained in {cached[1]['seconds']:.0f} s)")
        return cached
    exposures = [(item.text, count) for count in GROUPS for item in plan.groups[count]]
    blocks = lm.training_blocks(tokenizer, background, exposures, recipe, seed=seed, with_items=name == "C")
    model = lm.new_model(recipe, tokenizer, seed)
    print(f"  {name}: {lm.parameters(model) / 1e6:.2f}M parameters, {blocks.numel():,} tokens in {blocks.shape[0]} blocks", flush=True)
    figures = lm.train(model, blocks, recipe, device=device)
    figures.update(parameters=lm.parameters(model), recipe=asdict(recipe), device=device, exposures=sum(count for _, count in exposures) if name == "C" else 0)
    lm.save(model, folder, figures)
    return model, figures


def probe(client: httpx.Client, base_url: str, name: str, plan: Design) -> dict[str, Any]:
    """The product's completion probe against the served model: each item's completion
    (`completions`, item id → text), cached as it came back; `main` scores them as the product scores
    them now (`completion_report`)."""
    items = [item.probe_item() for item in plan.probed()]
    probes = plan_probes(items, dataset=plan.source.dataset, split=plan.source.split)
    endpoint = ProbeEndpoint(base_url=base_url, model=name, concurrency=2, timeout_seconds=120.0)
    completions = complete_sync(client, probes.prompts, endpoint, clock=time.time)
    return {"completions": {entry.item_id: entry.completion for entry in completions if entry.completion is not None}}


def verbatim(probed: dict[str, Any], plan: Design) -> dict[str, dict[str, float]]:
    """Per band, the share of items whose greedy continuation reproduced at least half of the
    remainder as one run (`lcs_ratio >= 0.5`), and the share reproduced whole (Levenshtein 1)."""
    out = {}
    for band, members in [*((f"{count}x", plan.groups[count]) for count in GROUPS), ("unexposed", plan.unexposed), ("control", plan.control)]:
        scores = [probed["scores"][item.item_id] for item in members if item.item_id in probed["scores"]]
        out[band] = {
            "half": float(np.mean([score["lcs_ratio"] >= 0.5 for score in scores])),
            "whole": float(np.mean([score["levenshtein"] >= 0.999 for score in scores])),
            "mean_levenshtein": float(np.mean([score["levenshtein"] for score in scores])),
        }
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu", help="cpu, or cuda on a machine with a GPU (not measured here).")
    parser.add_argument("--retrain", action="store_true", help="Train the models again instead of loading the cached ones.")
    parser.add_argument("--rescore", action="store_true", help="Probe and score the items again instead of reading the cached per-item scores.")
    parser.add_argument("--pool", choices=sorted(POOLS), default="kev", help="The probed items: CISA KEV records, or Apache Hadoop Jira reports.")
    parser.add_argument("--cutoff", type=date.fromisoformat, help="The bench's cutoff (the pool's by default: 2024-01-01 for kev, 2023-01-01 for hadoop).")
    parser.add_argument("--per-group", type=int, default=80, help="Items per exposure group (1, 3, 10, 30 times).")
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--n", type=int, default=50, help="Items drawn per band in each draw (without replacement).")
    parser.add_argument("--epochs", type=float, default=lm.Recipe.epochs, help="Passes over the background.")
    parser.add_argument("--background-chars", type=int, default=lm.Recipe.background_chars)
    parser.add_argument("--layers", type=int, default=lm.Recipe.layers)
    parser.add_argument("--width", type=int, default=lm.Recipe.width)
    parser.add_argument("--heads", type=int, default=lm.Recipe.heads)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--reference-seed", type=int, default=SEEDS["R"], help="Seed of the reference model R (another seed trains and caches another R).")
    parser.add_argument("--seed", type=int, default=20261205)
    parser.add_argument("--first-cutoff", type=date.fromisoformat, help="First quarterly cutoff of the clean models' temporal splits (2022-01-01 for kev, 2021-01-01 for hadoop).")
    parser.add_argument("--last-cutoff", type=date.fromisoformat, help="Last cutoff of the temporal splits (2025-01-01 for kev, 2024-01-01 for hadoop).")
    parser.add_argument("--split-draws", type=int, default=400, help="Draws per temporal split and per random split.")
    parser.add_argument("--chance-splits", type=int, default=100, help="Random splits of the unexposed and control pools for the chance spread.")
    parser.add_argument("--chance-draws", type=int, default=200, help="Draws per random split.")
    parser.add_argument("--train-only", action="store_true", help="Stop after training (or loading) the models.")
    args = parser.parse_args()
    pool = POOLS[args.pool]
    args.cutoff, args.first_cutoff, args.last_cutoff = args.cutoff or pool.cutoff, args.first_cutoff or pool.first_cutoff, args.last_cutoff or pool.last_cutoff
    torch.set_num_threads(args.threads)
    recipe = replace(lm.Recipe(), epochs=args.epochs, background_chars=args.background_chars, layers=args.layers, width=args.width, heads=args.heads)
    clock = Clock()
    OUT.mkdir(parents=True, exist_ok=True)

    named = "" if pool.name == "kev" else f"-{pool.name}"
    background = clock.run("background", background_texts, DATA, pool=pool.name, max_chars=recipe.background_chars)
    tokenizer = clock.run("tokenizer", lm.train_tokenizer, background, recipe.vocab, OUT / f"tokenizer-{recipe.vocab}-{recipe.background_chars}{named}.json")
    items = pool.items(DATA, lambda text: len(tokenizer.encode(text).ids) + 2 <= recipe.block)
    plan: Design = clock.run("design", design, items, cutoff=args.cutoff, per_group=args.per_group, seed=args.seed, pool=pool.name)
    counts = {**{f"{count}x": len(plan.groups[count]) for count in GROUPS}, "unexposed": len(plan.unexposed), "control": len(plan.control)}
    twins = {band: sum(1 for value in plan.twins.values() if value == band) for band in ("unexposed", "control")}
    print(f"  {len(items)} {pool.dataset} items under {recipe.block} tokens; cutoff {args.cutoff}; {counts}")
    print(f"  near duplicates of exposed items left out (curation.evidence.clean_band): {twins}")

    models: dict[str, LoadedModel] = {}
    runs: dict[str, dict[str, Any]] = {}
    for name in ("C", "N", "R"):
        seed = args.reference_seed if name == "R" else SEEDS[name]
        model, runs[name] = clock.run(f"train {name}", trained, name, recipe, tokenizer, background, plan, seed=seed, device=args.device, retrain=args.retrain)
        models[name] = LoadedModel(name=name, model=model, tokenizer=tokenizer, device=args.device)
    if args.train_only:
        return 0

    fresh = args.retrain or args.rescore
    key = f"{recipe.key()}-{plan.key()}"
    with serve(models) as base_url, httpx.Client() as client:
        probed = cached(OUT / f"probes-{key}.json", clock, fresh, MODELS, lambda names: {name: clock.run(f"probe {name}", probe, client, base_url, name, plan) for name in names})
        scored = cached(
            OUT / f"logprobs-{key}-r{args.reference_seed}.json", clock, fresh, MODELS, lambda names: clock.run("log-probs", logprob_reports, client, base_url, plan, targets=names)
        )

    probed = {name: completion_report(plan, found["completions"], model=name) for name, found in probed.items()}  # as the product scores them now
    rng = np.random.default_rng(args.seed)
    rows: list[PowerRow] = clock.run("power", draw_rates, plan, probed, scored, rng=rng, draws=args.draws, n=args.n)
    single = collapsed(plan)
    single_rows: list[PowerRow] = clock.run("power, one per cluster", draw_rates, single, probed, scored, rng=rng, draws=args.draws, n=args.n)
    cutoffs = quarterly_cutoffs(args.first_cutoff, args.last_cutoff)
    splits = clock.run("temporal splits", clean_split_rates, plan, probed, scored, cutoffs=cutoffs, rng=rng, draws=args.split_draws, n=args.n)
    spread = clock.run("chance spread", chance_spread, plan, probed, scored, model="N", splits=args.chance_splits, rng=rng, draws=args.chance_draws, n=args.n)
    shares = {name: verbatim(probed[name], plan) for name in probed}
    print()
    powered = print_table(rows, shares, runs, probed, scored, n=args.n, draws=args.draws)
    rate_table(single_rows, n=args.n, draws=args.draws, title="one item per near-duplicate cluster within the unexposed and control bands")
    sized = split_table(splits, spread, draws=args.split_draws, n=args.n)
    passed = powered and sized
    results = {
        "machine": f"{machine()}, {os.cpu_count()} cores, torch on {torch.get_num_threads()} threads, {args.device}",
        "pool": pool.name, "cutoff": args.cutoff.isoformat(), "counts": counts, "twins_left_out": twins,
        "recipe": asdict(recipe), "reference_seed": args.reference_seed, "models": runs, "verbatim": shares, "draws": args.draws, "n": args.n, "tests": list(TESTS),
        "probe_reports": {name: probed[name]["report"] for name in probed},
        "logprob_reports": {name: {key: scored[name][key] for key in ("test", "report", "summary")} for name in scored},
        "power": [asdict(row) for row in rows], "passed": passed,
        "power_one_per_cluster": [asdict(row) for row in single_rows],
        "clean_temporal_splits": [asdict(row) | {"mean": row.mean} for row in splits], "chance_spread_one_split": spread,
        "split_draws": args.split_draws, "chance_splits": args.chance_splits, "chance_draws": args.chance_draws, "phases_seconds": clock.phases,
    }  # fmt: skip
    default_size = replace(recipe, epochs=lm.Recipe.epochs, background_chars=lm.Recipe.background_chars) == lm.Recipe()
    suffix = named + ("" if args.reference_seed == SEEDS["R"] else f"-r{args.reference_seed}") + ("" if default_size else f"-{recipe.key()}")
    written = OUT / f"results{suffix}.json"
    written.write_text(json.dumps(results, indent=1))
    print(f"\nphases (s): {clock.phases}\nwritten: {written.relative_to(ROOT)}")
    return 0 if passed else 1


if __name__ == "__main__":
    raise SystemExit(main())

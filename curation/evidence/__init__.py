"""Contamination evidence: the temporal-split report and completion probing against a post-cutoff
control band. Pure library code: results, items, the HTTP client and the random generator are
passed in; the service fills the inputs from its tables and serves the reports.

Entry points (imported from their modules, so that importing one does not load matplotlib):

- `temporal_split.temporal_split_report(results, cutoff=, model=, corpus=, rng=)` → `TemporalSplitReport`
- `probe_runner.probe_sync(client, items, endpoint, dataset=, split=, cutoff=)` and `probe_async`
  → `ProbeReport`; step by step: `probing.plan_probes` → `probe_runner.complete_sync` /
  `complete_async` → `probe_report.probe_report`
- `charts.temporal_split_chart(report)`, `charts.probe_chart(report)` → SVG or PNG bytes

The input and report models live in `schemas.evidence`.
"""

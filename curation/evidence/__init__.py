"""Contamination evidence: the temporal-split report, completion probing against a post-cutoff
control band, and leak scanning. Results, items, the HTTP client and the random generator are
passed in, so every report is reproducible.

Owns: the temporal-split statistics and report (`temporal_split`), the per-item results it
compares, gathered from the database (`item_results`), the items a probe sends (`probe_items`),
cutting items and planning prompts (`probing`), sending prompts to an OpenAI-compatible endpoint
(`probe_runner`), scoring the completions (`probe_report`), the log-probability membership tests:
their scores and the parsing of the answers (`membership`), their requests (`logprob_runner`) and
report (`membership_report`), charts (`charts`), the shared
wording of every report (`wording`), and scanning text dumps for canaries and copies of
released items (`canary`). Modules import matplotlib only in `charts`, so a report does not
load it. The input and report models live in `schemas.evidence`.
May use: `schemas`, `curation.intervals`, `curation.dedup.fingerprints` (the scanner's sketches),
`ingest.http`.
"""

"""Runs and the model registry in the service.

Owns: starting runs through the gate and the sealed budget, their items, results and scores
(`runs`), models and endpoints with their data-retention terms (`model_registry`), two models
compared on the dev items both scored (`comparison`, with the paired statistic in `paired`), and
the routes for runs, exposure reports, models and endpoints (`routes`).
May use: `service.core`, `curation.runs`, `curation.releases.visibility` (which items are
sealed), `service.evals` (evals and releases), `service.items.reads` (item lookups), `schemas`.
"""

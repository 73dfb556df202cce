"""Contamination evidence in the service: reports, probes and leak scans on the configured
database.

Owns: the temporal-split report and corpus result uploads (`temporal_split`), the public-inflation
report (`public_inflation`), completion probes prepared, gated, recorded in the ledger, run and
shown (`probes`), the app's background probe runner (`probe_worker`), the routes under
`/v1/reports`, `/v1/corpora` and `/v1/probes` (`routes`), and the `report`, `probe` (`cli`) and
`canary scan` (`canary_cli`) commands.
May use: `service.core`, `curation.evidence`, `curation.scale`, `curation.runs`, `service.evals`,
`service.runs`, `service.sources`, `schemas`.
"""

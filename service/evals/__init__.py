"""Evals and releases in the service: definitions, the refresh that writes a release, and serving
releases.

Owns: eval definitions with their canary and encrypted seal key (`definitions`), the refresh of a
period under the eval's lock (`refresh`), reading releases, manifests, exports, verification and
the sealed-read budget (`releases`), the routes under `/v1/evals` (`routes`) and the `eval`,
`refresh`, `verify` and `export` commands (`cli`).
May use: `service.core`, `curation.releases`, `schemas`.
"""

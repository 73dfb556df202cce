"""Items and review: reading items as readers may see them, and review decisions.

Owns: item lookups, pages, read models with sealed content withheld, dedup status and the read
models of similar items (`reads`), the routes under `/v1/items` for reading and reviewing
(`routes`) and the `review` command (`cli`).
May use: `service.core`, `curation.review`, `curation.releases.visibility`,
`curation.dedup.similarity`, `service.evals.definitions` (seal keys), `service.dedup`
(the read-only index, for review's neighbours), `schemas`.
"""

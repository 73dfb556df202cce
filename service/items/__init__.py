"""Items and review: reading items as readers may see them, and review decisions.

Owns: item lookups, pages, read models with sealed content withheld, dedup status and the read
models of similar items (`reads`), the routes under `/v1/items` for reading and reviewing
(`routes`) and the `review` command (`cli`), which also puts duplicates decided with a low
margin before a person.
May use: `service.core`, `curation.review`, `curation.releases.visibility`,
`curation.dedup.similarity`, `curation.dedup.overrides` (rulings shown with an item, and made in
review), `curation.dedup.stats` (review's low-margin duplicates), `service.evals.definitions`
(seal keys), `service.dedup` (the read-only index, for review's neighbours), `schemas`.
"""

"""Items and review: reading items as readers may see them, and review decisions.

Owns: item lookups, pages, read models with sealed content withheld, dedup status and the read
models of similar items (`reads`), the routes under `/v1/items` for reading, editing, reviewing
and undoing a review decision (`routes`), the `review` command (`cli`: decisions and undos by
id) with its interactive pass over the review queue (`review_cli`), which also puts duplicates
decided with a low margin before a person, and the `item` group that edits items and shows their
revisions (`edit_cli`).
May use: `service.core`, `curation.review`, `curation.editing`, `curation.releases.visibility`,
`curation.dedup.similarity`, `curation.dedup.overrides` (rulings shown with an item, and made in
review), `curation.dedup.stats` (review's low-margin duplicates), `service.evals.definitions`
(seal keys), `service.evals.review_queue` and `service.evals.sealed_review` (the review queue as
readers may see it, and the command line's sealed review window), `service.dedup` (the read-only
index, for review's neighbours, and low-margin duplicates as readers may see them), `schemas`.
"""

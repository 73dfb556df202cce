"""The common scale of an eval's releases: an item response model fitted over every run's per-item
results (`irt`), and what it answers (`equating`): how hard each release is, what a run would score
on another release, and a score change split into the part due to the set and the part due to the
model, each with its interval. And a model's public score against the scale of other models
(`inflation`): whether its score on a public benchmark is higher than its private eval score
predicts, judged by how other models relate the two.

Owns: the fit and its bootstrap, the quantities derived from a fit, and the public-inflation test.
May use: `schemas`, `curation.intervals`, `curation.evidence.wording` (the reports' shared
wording); numpy and scipy. Pure computation: no database, no clock.
"""

"""The common scale of an eval's releases: an item response model fitted over every run's per-item
results (`irt`), and what it answers (`equating`): how hard each release is, what a run would score
on another release, and a score change split into the part due to the set and the part due to the
model, each with its interval.

Owns: the fit and its bootstrap, and the quantities derived from a fit.
May use: `schemas`; numpy and scipy. Pure computation: no database, no clock.
"""

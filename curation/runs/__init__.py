"""Runs: what may be sent to a model endpoint, what sending it exposes, and what a run scored.

Owns: the gate in front of endpoints (`gate`), the exposure ledger writer shared by runs and
completion probes (`ledger`), exposure reports read from the ledger (`exposure`), and a run's
summary score (`scores`).
May use: `schemas`, `curation.intervals`.
"""

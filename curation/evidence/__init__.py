"""Contamination evidence: the temporal-split report and completion probing against a post-cutoff
control band. Pure library code: results, items, the HTTP client and the random generator are
passed in; the service fills the inputs from its tables and serves the reports."""

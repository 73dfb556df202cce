"""Redaction of secrets, e-mail addresses and IP addresses in incident text.

Nothing is re-exported here: each name is imported from the module that owns it, so there is
one path to it. `ingest.redaction.redactor` holds the public API (`Redactor`,
`RedactionPolicy`, `RedactionResult`, the placeholders); `ingest.redaction.detectors` the
secret formats (`SECRET_PLUGINS`); `ingest.redaction.network` the e-mail and IP address
heuristics; `ingest.redaction.address_context` how an address is told from a version number; `ingest.redaction.rules` the machinery secret rules run on.
"""

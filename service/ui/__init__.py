"""The web UI under `/ui`: server-rendered pages for curators, reviewers and eval owners, signed
in with an API token (a session cookie; `service.core.sessions`), with every asset served here.

Owns: the pages and their templates and assets, the sign-in and sign-out forms, the CSRF check
of every state-changing request, the HTML error pages, and `/` (a redirect to `/ui`).
May use: `service.core`, `curation`, `ingest`, `schemas`, and the logic modules (never the routes
or the command line) of the other service domains. No page runs the embedding model.
"""

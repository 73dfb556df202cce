"""Test support for the evidence tests: real dated corpora and a memorising chat-completions server."""

"""Test support shared by several domains: data files, servers on loopback (embeddings, a word n-gram
model), real dated corpora, command-line runners, and a third-party connector as a plugin package
would ship it (`statuspage`)."""

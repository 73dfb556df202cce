"""The goldenset service: REST API, auth, settings, database, scheduler and CLI."""

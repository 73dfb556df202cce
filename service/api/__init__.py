"""HTTP routers: thin, one module per resource; the logic lives in service and curation modules."""

"""Pull connectors: one module per incident system, a typed base, and a registry by kind."""

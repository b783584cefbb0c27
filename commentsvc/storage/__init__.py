"""Storage: the engine, every SQL statement (``queries``), list positions and counters,
replicas and the page caches."""

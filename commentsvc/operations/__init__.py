"""Operations: health, metrics, logs, the command line, demo data and the production
server."""

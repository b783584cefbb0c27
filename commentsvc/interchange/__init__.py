"""Interchange: NDJSON import and export, and the bulk loading they stand on."""

"""All SQL of the service, as named constants with :name parameters.

``listing`` serves requests; ``positions`` keeps positions and counts exact on write;
``interchange`` loads and dumps NDJSON. Nothing outside this package writes SQL.
"""

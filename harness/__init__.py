"""What the tests and the benchmark scripts both use to drive the service from outside.

``servers``: the service under gunicorn on a free loopback port, one request on a new
connection, a seeded database with signed-in users. ``mixed_load``: reads and writes
from many threads, and the check that nothing was lost. A package of its own, so that
tests need not import the benchmark scripts and the scripts need not import the tests.
"""

"""Hypothesis profiles, so property tests are bounded and repeatable in `make test`.

``ci`` (the default) runs a fixed, modest number of examples derived from each test's
name, so every run tries the same inputs and the suite's time stays bounded;
``thorough`` (``HYPOTHESIS_PROFILE=thorough``) tries 25 times as many, randomly, for a
longer search by hand. Neither keeps an example database: a failure prints its own reproducer.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

# Requests through the Flask test client take milliseconds each, and a test's app and
# database are set up outside the examples: time limits would only make runs flaky.
settings.register_profile(
    "ci", max_examples=40, deadline=None, derandomize=True, database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    print_blob=True)
settings.register_profile(
    "thorough", max_examples=1000, deadline=None, database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    print_blob=True)
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")
settings.load_profile(PROFILE)


def examples(count: int) -> settings:
    """Settings for a test that affords more examples than the profile's (a pure function,
    an in-process request): ``count`` under ``ci``, 25 times that under ``thorough``."""
    return settings(max_examples=count * (25 if PROFILE == "thorough" else 1))

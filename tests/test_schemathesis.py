"""Schemathesis against the service's own OpenAPI document, in process (WSGI), on a seeded
database of each kind: no server error, and every answer's status, content type and
body are the ones the document declares.

Each example picks an operation, valid or invalid data for it (by the document), and
sends it anonymously or signed in as staff (so writes reach the database): 300 examples
per database under the ci profile (tests/hypothesis_profiles.py).
"""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import given
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from commentsvc.storage import engine
from commentsvc.web import auth
from hypothesis_profiles import examples

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_schema_conformance]


@pytest.fixture
def seeded(app, sample):
    """The app with the sample's comments, and a staff user's key: writes reach the data."""
    staff = next(r["id"] for r in sample if r["type"] == "user")
    with app.app_context(), engine.writing(engine.get_engine()) as conn:
        key = auth.create_token(conn, staff)
        auth.set_staff(conn, staff, True)
    return app, {"Authorization": f"Token {key}"}


@pytest.fixture
def operations(seeded) -> list:
    """Every operation of the document the app serves (loading it checks it is valid)."""
    document = schemathesis.openapi.from_wsgi("/api/schema/", seeded[0])
    return [result.ok() for result in document.get_all_operations()]


# Schemathesis's own pytest wrapper does not run under this pytest, so its strategies are
# drawn in a plain Hypothesis test: an operation, valid or invalid data for it (by the
# document), anonymous or signed in.
@examples(300)
@given(data=st.data())
def test_every_operation_keeps_the_documented_promises(seeded, operations, data):
    operation = data.draw(st.sampled_from(operations), label="operation")
    mode = data.draw(st.sampled_from(list(GenerationMode)), label="mode")
    case = data.draw(operation.as_strategy(generation_mode=mode), label="case")
    signed_in = data.draw(st.booleans(), label="signed in")
    case.call_and_validate(headers=seeded[1] if signed_in else None, checks=CHECKS)

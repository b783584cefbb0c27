"""commentsvc.webhooks: what the deliverer signs, verify accepts; anything else it refuses."""

from __future__ import annotations

import doctest
import json

import pytest

from commentsvc import webhooks
from commentsvc.webhooks import InvalidSignature, headers_for, verify

SECRET = "receiver-secret-0123456789abcdef"
BODY = json.dumps({"id": "e-1", "type": "comment.created", "data": {}}).encode()
NOW = 1_764_095_400


def signed(body: bytes = BODY, secret: str = SECRET, at: int = NOW) -> dict[str, str]:
    return headers_for(secret, "e-1", "comment.created", body, 1, timestamp=at)


def test_docstring_examples_hold():
    assert doctest.testmod(webhooks).failed == 0


def test_a_signed_event_verifies_and_is_returned():
    headers = signed()
    assert headers["Commentsvc-Signature"].startswith(f"t={NOW},v1=")
    assert verify(SECRET, headers, BODY, now=NOW) == json.loads(BODY)
    assert verify(SECRET, headers, BODY.decode(), now=NOW + 299)["id"] == "e-1"


def test_header_names_match_whatever_their_case():
    lowered = {name.lower(): value for name, value in signed().items()}
    assert verify(SECRET, lowered, BODY, now=NOW)["type"] == "comment.created"


def test_any_of_several_secrets_may_have_signed():
    assert verify(["old-secret-0123456789abcdef", SECRET], signed(), BODY, now=NOW)
    both = webhooks.signature_header(["old-secret-0123456789abcdef", SECRET], NOW, BODY)
    assert verify(SECRET, {**signed(), "Commentsvc-Signature": both}, BODY, now=NOW)


@pytest.mark.parametrize("change, message", [
    (lambda h, b: (h, b + b" "), "no signature matches"),
    (lambda h, b: (signed(secret="another-secret-0123456789abc"), b), "no signature matches"),
    (lambda h, b: ({k: v for k, v in h.items() if k != "Commentsvc-Signature"}, b),
     "no Commentsvc-Signature header"),
    (lambda h, b: ({**h, "Commentsvc-Signature": "t=abc,v1=00"}, b), "needs t="),
    (lambda h, b: ({**h, "Commentsvc-Signature": f"t={NOW}"}, b), "needs t="),
    (lambda h, b: (signed(at=NOW - 301), b), "more than 300 s"),
    (lambda h, b: (signed(at=NOW + 301), b), "more than 300 s"),
    (lambda h, b: ({**h, "Commentsvc-Event-Id": "e-2"}, b), "headers name .Commentsvc-Event-Id"),
    (lambda h, b: ({**h, "Commentsvc-Event-Type": "comment.deleted"}, b),
     "headers name .Commentsvc-Event-Type"),
    (lambda h, b: (signed(b"[1]"), b"[1]"), "not an event"),
    (lambda h, b: (signed(b"not json"), b"not json"), "not JSON"),
])
def test_anything_else_is_refused(change, message):
    headers, body = change(signed(), BODY)
    with pytest.raises(InvalidSignature, match=message):
        verify(SECRET, headers, body, now=NOW)


def test_the_event_headers_may_be_left_out_the_body_is_what_counts():
    headers = {"Commentsvc-Signature": signed()["Commentsvc-Signature"]}
    assert verify(SECRET, headers, BODY, now=NOW)["id"] == "e-1"


def test_an_empty_secret_verifies_nothing():
    with pytest.raises(InvalidSignature):
        verify("", headers_for("", "e-1", "comment.created", BODY, 1, timestamp=NOW), BODY,
               now=NOW)


def test_a_wider_tolerance_accepts_an_older_signature():
    assert verify(SECRET, signed(at=NOW - 3600), BODY, now=NOW, tolerance=3601)


def test_the_receiver_example_of_the_docs_runs_as_written(monkeypatch, capsys):
    """docs/EVENTS.md's receiving Flask app: 204 for a signed event (told once), 400 for
    anything else."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "EVENTS.md").read_text()
    [code] = re.findall(r"```python\n(.*?)```", text, re.S)
    monkeypatch.setenv("COMMENTSVC_WEBHOOK_SECRET", SECRET)
    namespace: dict = {"__name__": "receiver_example"}
    exec(compile(code, "EVENTS.md", "exec"), namespace)  # noqa: S102 - the doc's own code
    client = namespace["app"].test_client()
    body = json.dumps({"id": "e-1", "type": "comment.created",
                       "data": {"comment_id": 7}}).encode()
    headers = headers_for(SECRET, "e-1", "comment.created", body, 1)
    for _attempt in (1, 2):
        assert client.post("/hooks/comments", data=body, headers=headers).status_code == 204
    assert capsys.readouterr().out == "comment.created 7\n"
    assert client.post("/hooks/comments", data=body + b" ", headers=headers).status_code == 400

"""Headers that keep a browser from misreading answers: nosniff on every one, and the
browsable page's strict Content-Security-Policy."""

from __future__ import annotations

import re

import pytest

BROWSER = {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}
LIST = "/api/comments/"


def answers(client, community) -> dict[str, object]:
    """One response of every kind the API gives, by name."""
    ann = community.auth("ann")
    tag = client.get(LIST).headers["ETag"]
    page = client.get(LIST, headers=BROWSER)
    css = re.search(r'<link rel="stylesheet" href="([^"]+)">', page.get_data(as_text=True))
    return {
        "json list": client.get(LIST),
        "head": client.head(LIST),
        "304": client.get(LIST, headers={"If-None-Match": tag}),
        "html page": page,
        "html 304": client.get(LIST, headers={**BROWSER, "If-None-Match": page.headers["ETag"]}),
        "options json": client.options(LIST),
        "options html": client.options(LIST, headers=BROWSER),
        "detail": client.get("/api/comments/100/"),
        "detail options": client.options("/api/comments/100/"),
        "201": client.post(LIST, headers=ann, json={"content_type": "comics.comicpage",
                                                     "object_id": 10, "body": "hi"}),
        "201 html": client.post(LIST, headers={**ann, **BROWSER},
                                data={"content_type": "comics.comicpage", "object_id": "10",
                                      "body": "hi"}),
        "patch": client.patch("/api/comments/102/", headers=ann, json={"is_read": True}),
        "204": client.delete("/api/comments/100/", headers=ann),
        "400": client.get(LIST + "?page_size=x"),
        "401": client.post(LIST, json={}),
        "403": client.delete("/api/comments/102/", headers=ann),  # bob's comment
        "404 page": client.get(LIST + "?page=99"),
        "404 route": client.get("/api/nothing/"),
        "405": client.put(LIST),
        "406": client.get(LIST, headers={"Accept": "image/png"}),
        "415": client.post(LIST, headers=ann, data="x", content_type="text/plain"),
        "schema": client.get("/api/schema/"),
        "stylesheet": client.get(css.group(1)),
        "healthz": client.get("/healthz"),
        "readyz": client.get("/readyz"),
        "metrics": client.get("/metrics"),
        "404 outside the api": client.get("/nothing/here"),
        "405 on healthz": client.post("/healthz"),
    }


def test_every_answer_carries_nosniff(client, community):
    seen = answers(client, community)
    statuses = {name: response.status_code for name, response in seen.items()}
    # The table covers what it names: each answer is the kind it says.
    assert statuses["304"] == statuses["html 304"] == 304
    assert statuses["204"] == 204 and statuses["201"] == statuses["201 html"] == 201
    assert [statuses[name] for name in ("400", "401", "403", "404 page", "404 route", "405",
                                        "406", "415")] == [400, 401, 403, 404, 404, 405, 406,
                                                           415]
    assert seen["html page"].mimetype == "text/html"
    assert seen["stylesheet"].mimetype == "text/css"
    missing = [name for name, response in seen.items()
               if response.headers.get("X-Content-Type-Options") != "nosniff"]
    assert missing == []
    for response in seen.values():
        response.close()


def directives(policy: str) -> dict[str, list[str]]:
    """A Content-Security-Policy as directive -> its sources."""
    parsed = {}
    for part in policy.split(";"):
        name, *sources = part.split()
        assert name not in parsed, f"{name} given twice"
        parsed[name] = sources
    return parsed


@pytest.mark.parametrize("path", [LIST, "/api/comments/100/"])
def test_the_page_policy_is_strict(client, community, path):
    policy = directives(client.get(path, headers=BROWSER).headers["Content-Security-Policy"])
    assert policy["default-src"] == ["'none'"]  # anything not named below loads nothing
    # The page's own script only (browsable.js), which talks to this site only.
    assert policy["script-src"] == ["'self'"]
    assert policy["connect-src"] == ["'self'"]
    assert policy["style-src"] == ["'self'"]
    assert policy["img-src"] == ["'self'", "http:", "https:"]  # avatars may be elsewhere
    assert policy["form-action"] == ["'self'"]
    assert policy["base-uri"] == ["'none'"]
    assert policy["frame-ancestors"] == ["'none'"]
    everything = " ".join(source for sources in policy.values() for source in sources)
    for loose in ("'unsafe-inline'", "'unsafe-eval'", "*", "data:", "blob:"):
        assert loose not in everything.split()


def test_json_answers_carry_no_page_policy(client, community):
    """The policy is the page's: a JSON answer is never rendered, so it needs none."""
    assert "Content-Security-Policy" not in client.get(LIST).headers

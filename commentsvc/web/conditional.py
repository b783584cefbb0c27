"""Conditional requests: a strong ETag per list response, and the 304 check.

The tag is a digest of what the response is made of: the list's version (bumped by every
write that changes the list) and size, the URL asked for (which fixes the filter, page,
page size and the page URLs), and the display settings. So it is known from one counter
row, before any comment is read, and it changes whenever the response would.
"""

from __future__ import annotations

from hashlib import blake2b

from flask import Request

from commentsvc.storage.store import ListState


def list_etag(state: ListState, url: str, query: str, display_digest: str) -> str:
    """A strong ETag (quoted) for one list response; ``url`` is ``request_url(request)``."""
    material = f"{state.version}\x00{state.count}\x00{url}?{query}\x00{display_digest}"
    digest = blake2b(material.encode("utf-8", "surrogatepass"), digest_size=16)
    return f'"{digest.hexdigest()}"'


def request_url(request: Request) -> str:
    """What the page URLs of a response are built from (scheme, host, mount, path), cheaply.

    ``request.base_url`` is made of exactly these parts but spends most of its time turning
    them into an IRI; for telling responses apart the parts themselves serve.
    """
    return f"{request.scheme}://{request.host}{request.root_path}\x00{request.path}"


def matches(request: Request, tag: str) -> bool:
    """Whether If-None-Match names this response (weak comparison, as RFC 9110 says)."""
    return request.if_none_match.contains_weak(tag.strip('"')) if request.if_none_match else False

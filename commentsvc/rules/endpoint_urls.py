"""How a webhook endpoint's URL is shown: in /metrics (which anyone may read), the
deliverer's log and the events command. An endpoint URL may carry secrets (a
``user:password@`` part, a token in its query), so it is never shown whole.

``shown`` keeps the scheme, host, port and path, so operators can tell endpoints apart,
and puts ``***`` for the password, each query value and any fragment (a lone user name
too: it is often a token). ``labels`` numbers endpoints that would show the same, so
metrics never merge two of them; ``scrubbed`` takes an endpoint's secrets out of a text
that may quote its URL (an error of requests, a receiver's answer).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import quote, unquote, unquote_plus, urlsplit

HIDDEN = "***"


def shown(url: str) -> str:
    """The URL without its secrets.

    >>> shown("http://admin:s3cretpw@127.0.0.1:18672/h?token=abc&id=7#frag")
    'http://admin:***@127.0.0.1:18672/h?token=***&id=***#***'
    >>> shown("https://ghp_token@hooks.example:8443/in?flag")
    'https://***@hooks.example:8443/in?***'
    >>> shown("https://site.example/hooks/comments")
    'https://site.example/hooks/comments'
    """
    parts = urlsplit(url)
    user, at, host = parts.netloc.rpartition("@")
    text = f"{parts.scheme}://{_shown_user(user) + at}{_shown_host(host)}{parts.path}"
    if "?" in url.split("#", 1)[0]:
        text += "?" + _shown_query(parts.query)
    if "#" in url:
        text += "#" + HIDDEN
    return text


def labels(urls: Iterable[str]) -> dict[str, str]:
    """Each URL's shown form; where several show the same, each gets `` (n)``, numbered
    in the order of the full URLs, so they stay apart without saying how they differ.

    >>> named = labels(["http://h/a?t=2", "http://h/a?t=1", "http://h/b"])
    >>> [named[url] for url in ("http://h/a?t=1", "http://h/a?t=2", "http://h/b")]
    ['http://h/a?t=*** (1)', 'http://h/a?t=*** (2)', 'http://h/b']
    """
    by_shown: dict[str, list[str]] = {}
    for url in sorted(set(urls)):
        by_shown.setdefault(shown(url), []).append(url)
    named: dict[str, str] = {}
    for text, same in by_shown.items():
        for number, url in enumerate(same, start=1):
            named[url] = text if len(same) == 1 else f"{text} ({number})"
    return named


def scrubbed(text: str, url: str) -> str:
    """``text`` with every secret of ``url`` replaced: the URL itself, its query and
    user part wherever quoted, and each secret value standing on its own.

    >>> scrubbed("Max retries exceeded with url: /h?token=abc (refused)",
    ...          "http://admin:pw@127.0.0.1:9/h?token=abc")
    'Max retries exceeded with url: /h?token=*** (refused)'
    """
    parts = urlsplit(url)
    user = parts.netloc.rpartition("@")[0]
    pairs = [(url, shown(url))]
    if parts.query:
        pairs.append(("?" + parts.query, "?" + _shown_query(parts.query)))
    if user:
        pairs.append((user + "@", _shown_user(user) + "@"))
    for old, new in pairs:
        text = text.replace(old, new)
    if parts.query:  # the query as a client may quote it again, escapes redone
        text = re.sub(rf"{re.escape(parts.path or '/')}\?[^\s'\"#,;]+",
                      f"{parts.path or '/'}?{_shown_query(parts.query)}", text)
    for secret in sorted(_secrets(parts.query, user, parts.fragment), key=len, reverse=True):
        # on its own only: a short value ("1") must not eat into other words ("HTTP 501")
        text = re.sub(rf"(?<![A-Za-z0-9]){re.escape(secret)}(?![A-Za-z0-9])", HIDDEN, text)
    return text


def _shown_user(user: str) -> str:
    if not user:
        return ""
    name, colon, _password = user.partition(":")
    return f"{name}:{HIDDEN}" if colon else HIDDEN


def _shown_host(host: str) -> str:
    """The host and port; a "port" that is not a number is part of a password with a
    character the URL should have escaped, so it is hidden."""
    name, colon, port = host.rpartition(":")
    if not colon or port.isdigit() or port == "" or port.endswith("]"):
        return host
    return f"{name}:{HIDDEN}"


def _shown_query(query: str) -> str:
    return "&".join(f"{name}={HIDDEN}" if equals else HIDDEN if name else ""
                    for name, equals, _value in (part.partition("=")
                                                 for part in query.split("&")))


def _secrets(query: str, user: str, fragment: str) -> set[str]:
    """Every secret value, as written, decoded and escaped again as an HTTP client escapes
    it (its escapes in capitals, characters a URL may not hold escaped)."""
    name, colon, password = user.partition(":")
    raw = [password if colon else name, fragment]
    raw += [part.partition("=")[2] if "=" in part else part for part in query.split("&")]
    found = {form for value in raw for form in (
        value, unquote(value), unquote_plus(value), quote(unquote(value), safe=_URL_SAFE),
        re.sub(r"%[0-9a-f]{2}", lambda escape: escape[0].upper(), value))}
    found.discard("")
    return found


# What requests leaves unescaped in a URL it quotes (requests.utils.requote_uri).
_URL_SAFE = "!#$%&'()*+,/:;=?@[]~"

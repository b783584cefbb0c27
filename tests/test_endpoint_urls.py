"""How a webhook endpoint's URL is shown (commentsvc.rules.endpoint_urls): its password,
query values and fragment never, its scheme, host, port and path always; endpoints that
would show alike stay apart; errors quoting the URL lose its secrets."""

from __future__ import annotations

import doctest

import pytest
import requests

from commentsvc.rules import endpoint_urls
from commentsvc.rules.endpoint_urls import labels, scrubbed, shown

SECRET_URL = "http://admin:s3cretpw@127.0.0.1:9/h?token=abc"


def test_docstring_examples_hold():
    assert doctest.testmod(endpoint_urls).failed == 0


@pytest.mark.parametrize(("url", "expected"), [
    (SECRET_URL, "http://admin:***@127.0.0.1:9/h?token=***"),
    ("https://hooks.example/in", "https://hooks.example/in"),
    ("https://hooks.example:8443/a/b/?x=1&y=&z", "https://hooks.example:8443/a/b/?x=***&y=***&***"),
    ("https://tok3n@hooks.example/in", "https://***@hooks.example/in"),
    ("https://u:p%40ss@hooks.example/in#sig=1", "https://u:***@hooks.example/in#***"),
    ("http://[::1]:8080/in?k=v", "http://[::1]:8080/in?k=***"),
    ("http://a:p%3Fw@h/", "http://a:***@h/"),
    # a password with an unescaped "/" or "?" ends the host early: its start is still hidden
    ("http://a:pw?x@h/", "http://a:***?***"),
])
def test_a_url_is_shown_without_its_secrets(url, expected):
    assert shown(url) == expected


def test_endpoints_that_would_show_alike_are_numbered_and_no_others():
    urls = ["http://u:two@h/a?t=1", "http://u:one@h/a?t=1", "http://h/b?t=1"]
    named = labels(urls)
    assert named == {"http://u:one@h/a?t=1": "http://u:***@h/a?t=*** (1)",
                     "http://u:two@h/a?t=1": "http://u:***@h/a?t=*** (2)",
                     "http://h/b?t=1": "http://h/b?t=***"}
    assert labels(reversed(urls)) == named, "the same whatever order they come in"
    assert len(set(named.values())) == len(urls)


def test_an_error_of_requests_loses_the_query_it_quotes():
    with pytest.raises(requests.ConnectionError) as raised:
        requests.post(SECRET_URL, timeout=5)
    error = scrubbed(f"{type(raised.value).__name__}: {raised.value}", SECRET_URL)
    assert "abc" not in error and "s3cretpw" not in error
    assert "url: /h?token=*** " in error and "127.0.0.1" in error


def test_an_error_loses_each_secret_as_written_and_decoded_but_keeps_other_words():
    url = "http://admin:s3cret%21@h/p?t=v%21x&n=0#frag"
    text = ("Invalid URL 'http://admin:s3cret%21@h/p?t=v%21x&n=0#frag': s3cret! said v!x; "
            "HTTP 503 from /p?t=v%21x&n=0, frag")
    assert scrubbed(text, url) == ("Invalid URL 'http://admin:***@h/p?t=***&n=***#***': *** "
                                   "said ***; HTTP 503 from /p?t=***&n=***, ***")


@pytest.mark.parametrize("url", [
    "http://127.0.0.1:9/p?tok=ab%2fSLASHSECRET",
    "http://127.0.0.1:9/e?token=SECRé",
    "http://127.0.0.1:9/g?k=v&SECRETBARE|X",
    "http://127.0.0.1:9/h?a={SECRET}&b=x^y`z<w>\\q",
])
def test_an_error_of_requests_loses_the_query_it_quotes_with_escapes_redone(url):
    """requests quotes the URL escaped again: lower-case escapes in capitals, characters a
    URL may not hold escaped; none of those forms is left."""
    with pytest.raises(requests.ConnectionError) as raised:
        requests.post(url, timeout=5)
    error = scrubbed(f"{type(raised.value).__name__}: {raised.value}", url)
    assert "SECRET" not in error and "SECR%" not in error, error
    assert "127.0.0.1" in error

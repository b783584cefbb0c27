"""Settings: read from the environment, checked at start-up, each one documented."""

from __future__ import annotations

from pathlib import Path

import pytest

from commentsvc import settings

README = Path(__file__).resolve().parents[1] / "README.md"


def test_every_setting_is_in_the_readme():
    readme = README.read_text(encoding="utf-8")
    missing = [s.env_var for s in settings.SETTINGS if f"`{s.env_var}`" not in readme]
    assert missing == []


def test_environment_values_are_parsed():
    parsed = settings.from_environment({
        "COMMENTSVC_PAGE_SIZE": "25",
        "COMMENTSVC_CONTENT_TYPES": "users.user, blog.post",
        "COMMENTSVC_TIME_ZONE": "Europe/Paris",
        "DATABASE_URL": "postgresql://db/comments",
        "UNRELATED": "x",
    })
    assert parsed == {
        "COMMENTSVC_PAGE_SIZE": 25,
        "COMMENTSVC_CONTENT_TYPES": ("users.user", "blog.post"),
        "COMMENTSVC_TIME_ZONE": "Europe/Paris",
        "COMMENTSVC_DATABASE_URL": "postgresql+psycopg2://db/comments",
    }


@pytest.mark.parametrize(("name", "value"), [
    ("COMMENTSVC_PAGE_SIZE", "0"),
    ("COMMENTSVC_PAGE_SIZE", "ten"),
    ("COMMENTSVC_MAX_PAGE_SIZE", "-1"),
    ("COMMENTSVC_TIME_ZONE", "Mars/Olympus"),
    ("COMMENTSVC_CONTENT_TYPES", "users"),
    ("COMMENTSVC_CONTENT_TYPES", " , "),
    ("COMMENTSVC_DEFAULT_AVATAR", "avatar.png"),
    ("COMMENTSVC_TRUSTED_PROXIES", "-2"),
    ("COMMENTSVC_RETRY_AFTER", "soon"),
])
def test_bad_values_are_refused_by_name(name, value):
    with pytest.raises(settings.SettingsError, match=name):
        settings.from_environment({name: value})


def test_a_bad_webhook_url_is_named_without_the_secrets_of_any():
    """Endpoint URLs may carry passwords and tokens: a start-up error repeats none."""
    value = "http://admin:s3cretpw@hooks.example/in?token=abc ftp://ops:0therpw@x/y?k=def"
    with pytest.raises(settings.SettingsError) as refused:
        settings.from_environment({"COMMENTSVC_WEBHOOK_URLS": value})
    message = str(refused.value)
    assert "COMMENTSVC_WEBHOOK_URLS=(hidden)" in message
    assert "'ftp://ops:***@x/y?k=***' is not an http:// or https:// URL" in message
    for secret in ("s3cretpw", "abc", "0therpw", "def"):
        assert secret not in message


def test_defaults_when_nothing_is_set():
    values = settings.resolved({})
    assert values["PAGE_SIZE"] == 10
    assert values["MAX_PAGE_SIZE"] == 100
    assert values["TIME_ZONE"] == "UTC"
    assert values["DEFAULT_AVATAR"] == "/static/img/default-avatar.png"
    assert values["CONTENT_TYPES"] == ("users.user", "comics.comicpage")


def test_display_time_zone_and_default_avatar_reach_the_response(app_factory, sample_records):
    from conftest import insert_records

    app = app_factory(COMMENTSVC_TIME_ZONE="America/New_York",
                      COMMENTSVC_DEFAULT_AVATAR="/static/img/nobody.svg")
    insert_records(app, sample_records)
    body = app.test_client().get(
        "/api/comments/?content_type=users.user&object_id=17").get_json()
    # 2023-01-03T16:15:00Z is 11:15 AM in New York; li wei has no avatar
    (li_wei,) = [e for e in body["results"] if e["id"] == 1298]
    assert li_wei["date_added"] == "03 Jan, 2023, 11:15 AM"
    assert li_wei["author_avatar"] == "/static/img/nobody.svg"

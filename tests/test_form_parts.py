"""Multipart bodies: parts that name no field (found by schemathesis: a 500 before), text
parts in their charsets, and file parts beside the fields."""

from __future__ import annotations

from conftest import table_rows

NAMELESS = b"--XX\r\nContent-Disposition: form-data\r\n\r\n{}\r\n"
MULTIPART = "multipart/form-data; boundary=XX"


def field(name: str, value: str) -> bytes:
    return f'--XX\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode()


def test_a_patch_with_a_nameless_part_reads_only_the_named_fields(client, community):
    body = NAMELESS + field("is_read", "true") + b"--XX--\r\n"
    response = client.patch("/api/comments/102/", data=body, content_type=MULTIPART,
                            headers=community.auth("ann"))
    assert response.status_code == 200, response.get_json()
    assert response.get_json()["is_read"] is True


def test_a_patch_of_only_a_nameless_part_is_400_and_writes_nothing(app, client, community):
    before = table_rows(app)
    response = client.patch("/api/comments/102/", data=NAMELESS + b"--XX--\r\n",
                            content_type=MULTIPART, headers=community.auth("ann"))
    assert response.status_code == 400
    assert response.get_json() == {"is_read": ["This field is required."]}
    assert table_rows(app) == before


def test_a_post_with_a_nameless_part_reads_only_the_named_fields(client, community):
    body = (NAMELESS + field("content_type", "comics.comicpage") + field("object_id", "10")
            + field("body", "hello") + b"--XX--\r\n")
    response = client.post("/api/comments/", data=body, content_type=MULTIPART,
                           headers=community.auth("ann"))
    assert response.status_code == 201, response.get_json()
    assert response.get_json()["body"] == "hello"


def part(name: str, value: bytes, content_type: str | None = None, filename: str = "") -> bytes:
    """One multipart part of raw bytes, with its own Content-Type if given."""
    disposition = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename else "")
    typed = f"Content-Type: {content_type}\r\n" if content_type else ""
    return (f"--XX\r\nContent-Disposition: {disposition}\r\n{typed}\r\n".encode()
            + value + b"\r\n")


def post_parts(client, community, *parts: bytes):
    body = (field("content_type", "comics.comicpage") + field("object_id", "10")
            + b"".join(parts) + b"--XX--\r\n")
    return client.post("/api/comments/", data=body, content_type=MULTIPART,
                       headers=community.auth("ann"))


def test_a_text_part_that_is_not_utf8_is_400_and_writes_nothing(app, client, community):
    """Werkzeug decodes its bytes to U+FFFD: the text would be stored altered."""
    before = table_rows(app)
    for body, content_type in ((b"na\xefve caf\xe9", None),
                               (b"caf\xc3", "text/plain; charset=utf-8"),
                               (b"caf\xe9", "text/plain; charset=us-ascii")):
        response = post_parts(client, community, part("body", body, content_type))
        assert response.status_code == 400, content_type
        assert response.get_json() == {"detail": "The form data is not valid UTF-8."}
    assert table_rows(app) == before


def test_text_parts_are_stored_as_written_in_their_charset(client, community):
    for body, content_type, expected in (
            ("caf\u00e9 \ufffd kept".encode(), None, "caf\u00e9 \ufffd kept"),
            (b"na\xefve caf\xe9", "text/plain; charset=iso-8859-1", "na\u00efve caf\u00e9")):
        response = post_parts(client, community, part("body", body, content_type),
                              part("upload", b"\xff\xfe not text", filename="x.bin"))
        assert response.status_code == 201, response.get_json()
        assert response.get_json()["body"] == expected

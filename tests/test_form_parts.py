"""Multipart bodies with parts that name no field (found by schemathesis: a 500 before)."""

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

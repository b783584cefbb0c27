"""Which requests are the service's own work, for an engine it shares with a host site.

On such an engine only the service's work waits with its answer deadline (storage.
deadline.duty): a request to one of its blueprints, and what runs after it in the same
thread. Every other request of the host starts off duty, so the host's own queries wait
as they would without the service.
"""

from __future__ import annotations

from flask import Blueprint
from flask.blueprints import BlueprintSetupState

from commentsvc.storage import deadline

_INSTALLED = "commentsvc.on_duty"


def _off_duty() -> None:
    deadline.duty(False)


def _on_duty() -> None:
    deadline.duty(True)


def _start_off_duty(state: BlueprintSetupState) -> None:
    """Every request of the app starts off duty, before any hook of the host's (a thread
    serves one request after another and keeps what the last one said)."""
    app = state.app
    if not app.extensions.get(_INSTALLED):
        app.extensions[_INSTALLED] = True
        app.before_request_funcs.setdefault(None, []).insert(0, _off_duty)


def serve_on_duty(blueprint: Blueprint) -> None:
    """Count ``blueprint``'s requests as the service's work, in every app it joins."""
    blueprint.record(_start_off_duty)
    blueprint.before_request(_on_duty)

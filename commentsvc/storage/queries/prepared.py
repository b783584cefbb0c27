"""A statement in the forms storage.prepared runs it in (PostgreSQL)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from typing import Any

# Sent with each execution, in the same round trip: the statement runs on the plan
# PostgreSQL made for it once, not on one planned again for these values. Left to itself
# the server keeps planning these statements anew (its estimate for arrays of unknown
# length makes the generic plan look dearer), and planning took 0.13 to 0.27 ms where
# running took 0.03 to 0.08 (BENCHMARKS.md, "Reads first"). Each part of them looks rows
# up by their keys, a plan that does not depend on the values; the server makes it again
# when a table's statistics change (a small table may be read whole). LOCAL: it ends with
# the transaction, so a host's own statements on the same connection keep the server's
# default.
GENERIC_PLAN = "SET LOCAL plan_cache_mode = force_generic_plan;"


@dataclass(frozen=True)
class Prepared:
    """A PostgreSQL statement in the three forms the batch writer runs it in: prepared
    once on a connection (``prepare``), then executed by name (``execute``, psycopg2's
    positional parameters, ``values``), or, where a server or pooler keeps no prepared
    statements, sent whole (``plain``, psycopg2's named parameters). ``parameters`` are
    the :name parameters of ``body`` with their types, in order. Each form is made once:
    ``execute`` or ``plain`` is sent on every batch."""

    name: str
    body: str
    parameters: dict[str, str]

    @cached_property
    def prepare(self) -> str:
        numbered = self.body
        for number, name in enumerate(self.parameters, start=1):
            numbered = re.sub(rf":{name}\b", f"CAST(${number} AS {self.parameters[name]})",
                              numbered)
        return f"PREPARE {self.name} AS {numbered}"

    @cached_property
    def execute(self) -> str:
        casts = ", ".join(f"CAST(%s AS {kind})" for kind in self.parameters.values())
        return f"{GENERIC_PLAN} EXECUTE {self.name} ({casts})"

    @cached_property
    def plain(self) -> str:
        plain = self.body
        for name, kind in self.parameters.items():
            plain = re.sub(rf":{name}\b", f"CAST(%({name})s AS {kind})", plain)
        return plain

    def values(self, params: dict[str, Any]) -> tuple[Any, ...]:
        return tuple(params[name] for name in self.parameters)

"""An Atom validator made of RFC 4287's own schema (data/atom.rnc, Appendix B).

rnc2rng turns the compact syntax into RELAX NG, which lxml checks. The schema's
Schematron rules (``s:rule``) come through the converter as annotations, which a RELAX NG
validator ignores; so they are taken out of the grammar and their XPath tests run here,
each on every element its context names, together with one rule the schema leaves to the
prose: no two ids alike.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import rnc2rng
from lxml import etree

ATOM_NS = "http://www.w3.org/2005/Atom"
SCHEMATRON_NS = "http://www.ascc.net/xml/schematron"
NAMESPACES = {"atom": ATOM_NS}
SCHEMA_PATH = Path(__file__).resolve().parent / "data" / "atom.rnc"


class InvalidAtom(AssertionError):
    """The document is not well-formed XML, or not valid Atom (the reasons are listed)."""


@cache
def schema() -> tuple[etree.RelaxNG, tuple[tuple[str, str, str], ...]]:
    """The grammar, and the Schematron rules as (context, test, message), made once."""
    converted = rnc2rng.dumps(rnc2rng.loads(SCHEMA_PATH.read_text(encoding="utf-8")))
    # rnc2rng declares the schema's ``namespace local = ""`` as xmlns:local="", which
    # XML namespaces forbid; the grammar names that namespace as ns="" where it uses it.
    grammar = etree.fromstring(converted.replace(' xmlns:local=""', "").encode("utf-8"))
    rules = []
    for rule in grammar.iter(f"{{{SCHEMATRON_NS}}}rule"):
        for check in rule.iter(f"{{{SCHEMATRON_NS}}}assert"):
            rules.append((rule.get("context"), check.get("test"), " ".join(check.text.split())))
        rule.getparent().remove(rule)
    return etree.RelaxNG(grammar), tuple(rules)


def schematron_rules() -> tuple[tuple[str, str, str], ...]:
    """The RFC schema's Schematron rules, as this validator asserts them."""
    return schema()[1]


def validate(body: bytes) -> etree._Element:
    """The parsed document, if it is well-formed, valid Atom; else InvalidAtom."""
    try:
        root = etree.fromstring(body, etree.XMLParser(resolve_entities=False, no_network=True))
    except etree.XMLSyntaxError as exc:
        raise InvalidAtom(f"not well-formed XML: {exc}") from exc
    grammar, rules = schema()
    if not grammar.validate(root):
        raise InvalidAtom(f"not valid by RFC 4287's schema: {grammar.error_log}")
    tree = root.getroottree()
    for context, test, message in rules:
        for element in tree.xpath(f"//{context}", namespaces=NAMESPACES):
            if not element.xpath(test, namespaces=NAMESPACES):
                raise InvalidAtom(message)
    ids = [element.text for element in root.iter(f"{{{ATOM_NS}}}id")]
    if len(ids) != len(set(ids)):
        raise InvalidAtom(f"ids repeat: {ids}")
    return root

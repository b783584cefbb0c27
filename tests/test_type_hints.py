"""Every public function of the package has type hints on its parameters and its return."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Callable, Iterator

import click

import commentsvc

VARIADIC = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)


def public_functions() -> Iterator[tuple[str, Callable]]:
    """(qualified name, function) for the package's public functions and methods.

    Public: defined in the package under a name without a leading underscore, in a module
    whose name has none either; methods of public classes, ``__init__`` included. A click
    command counts by its callback.
    """
    for info in pkgutil.walk_packages(commentsvc.__path__, "commentsvc."):
        if any(part.startswith("_") for part in info.name.split(".")):
            continue
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if isinstance(value, click.Command) and value.callback is not None:
                value = value.callback
            if name.startswith("_") or getattr(value, "__module__", None) != module.__name__:
                continue
            if inspect.isfunction(value):
                yield f"{info.name}.{name}", value
            elif inspect.isclass(value):
                for attr, member in vars(value).items():
                    if isinstance(member, staticmethod | classmethod):
                        member = member.__func__
                    if (inspect.isfunction(member) and member.__module__ == module.__name__
                            and (attr == "__init__" or not attr.startswith("_"))):
                        yield f"{info.name}.{name}.{attr}", member


def missing_hints(function: Callable) -> list[str]:
    """The parameters (and "return") of ``function`` without an annotation.

    ``self`` and ``cls`` need none, nor do ``*args``/``**kwargs`` passed through to a
    library's hook; ``__init__`` returns None by definition.
    """
    signature = inspect.signature(function)
    missing = [name for index, (name, parameter) in enumerate(signature.parameters.items())
               if parameter.annotation is inspect.Parameter.empty
               and parameter.kind not in VARIADIC
               and not (index == 0 and name in ("self", "cls"))]
    if (signature.return_annotation is inspect.Signature.empty
            and function.__name__ != "__init__"):
        missing.append("return")
    return missing


def test_the_walk_finds_the_package_functions():
    names = dict(public_functions())
    assert "commentsvc.standalone.factory.create_app" in names
    assert "commentsvc.web.views.CommentListView.get" in names
    assert "commentsvc.operations.cli.init_db_command" in names
    assert len(names) > 150


def test_every_public_function_has_type_hints():
    missing = {name: gaps for name, function in public_functions()
               if (gaps := missing_hints(function))}
    assert not missing, "\n".join(f"{name}: {', '.join(gaps)}"
                                  for name, gaps in sorted(missing.items()))

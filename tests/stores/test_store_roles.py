"""The store port stays a union of small roles: no role of more than eight methods.

A *role* is every ``Protocol`` class defined in a module of
``treadle._stores`` (``Store``'s :data:`~treadle._stores._store.ROLES`, the
outbox's three, the token keeper...). The *unions* (``Store``, ``Outbox``)
may be larger, but add no method of their own beyond ``close``: a new
operation goes into a role, so that consumers typed by that role see it
and the rest do not.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from typing import Protocol

import treadle._stores
from treadle._stores._outbox import Outbox
from treadle._stores._store import ROLES, Store

MOST_METHODS = 8
UNIONS: dict[type, set[str]] = {Store: {"close"}, Outbox: set()}


def _protocols() -> list[type]:
    found: list[type] = []
    for module_info in pkgutil.iter_modules(treadle._stores.__path__):
        module = importlib.import_module(f"treadle._stores.{module_info.name}")
        for value in vars(module).values():
            if (
                inspect.isclass(value)
                and value.__module__ == module.__name__
                and getattr(value, "_is_protocol", False)
            ):
                found.append(value)
    return found


def _own_methods(cls: type) -> set[str]:
    """The methods ``cls`` itself declares (not the dunders ``Protocol`` adds)."""
    return {
        name
        for name, value in vars(cls).items()
        if inspect.isfunction(value) and not name.startswith("__")
    }


def _methods(cls: type) -> set[str]:
    """Every method the protocol asks for, its bases' included."""
    names: set[str] = set()
    for base in cls.__mro__:
        if base not in {Protocol, object} and getattr(base, "_is_protocol", False):
            names |= _own_methods(base)
    return names


def test_no_store_role_has_more_than_eight_methods() -> None:
    protocols = _protocols()
    assert set(ROLES) <= set(protocols)
    too_big = {
        f"{cls.__module__}.{cls.__qualname__}": len(_methods(cls))
        for cls in protocols
        if cls not in UNIONS and len(_methods(cls)) > MOST_METHODS
    }
    assert too_big == {}


def test_the_unions_add_nothing_beyond_their_roles() -> None:
    for union, allowed in UNIONS.items():
        assert _own_methods(union) <= allowed, union
    assert {base for base in Store.__bases__ if base is not Protocol} == set(ROLES)
    # Every method of the port is some role's: a consumer can always be typed narrower.
    assert _methods(Store) - {"close"} == set().union(*(_methods(role) for role in ROLES))

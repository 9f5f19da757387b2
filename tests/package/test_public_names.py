"""The package's public names: each name `acp_green.__all__` lists imports from `acp_green` as the
very object its module defines, and any other name is an AttributeError naming it (the lazy
`__getattr__` of acp_green/__init__.py)."""

from __future__ import annotations

import importlib

import pytest

import acp_green


@pytest.mark.parametrize("name", sorted(acp_green._EXPORTS))
def test_each_public_name_is_its_modules_object(name):
    module = importlib.import_module(acp_green._EXPORTS[name])
    assert name in acp_green.__all__
    assert getattr(acp_green, name) is getattr(module, name)
    namespace: dict = {}
    exec(f"from acp_green import {name}", namespace)
    assert namespace[name] is getattr(module, name)


def test_an_unknown_name_is_an_attribute_error_naming_it():
    with pytest.raises(AttributeError, match="'NoSuchName'"):
        acp_green.NoSuchName  # noqa: B018
    with pytest.raises(ImportError):
        exec("from acp_green import NoSuchName", {})
    assert "__version__" in acp_green.__all__ and acp_green.__version__

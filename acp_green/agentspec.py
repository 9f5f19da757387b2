"""Turning `--agent SPEC` into a running agent: MODULE:ATTR or path/to/file.py:ATTR.

Every way a spec can be wrong ends in one `AgentSpecError` whose message is one line naming the
spec and what to change; nothing the agent's code raises while loading escapes as a traceback.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

from .agent import Agent

log = logging.getLogger(__name__)

SPEC_FORMS = "MODULE:ATTR or path/to/file.py:ATTR"


class AgentSpecError(Exception):
    """`--agent` names nothing that gives a usable agent; the message says why, in one line."""


def split_spec(spec: str) -> tuple[str, str]:
    """(module or file, attribute path) of a spec; the last ':' splits, so a path may hold one."""
    source, sep, attr = spec.rpartition(":")
    if not sep or not source or not attr:
        raise AgentSpecError(f"expected {SPEC_FORMS}, got {spec!r}")
    return source, attr


def is_file_source(source: str) -> bool:
    """A file path (it ends in .py or has a directory part) rather than an importable module name."""
    return source.endswith(".py") or os.sep in source or "/" in source


def absolute_spec(spec: str, cwd: str) -> str:
    """The same agent from any working directory: a file, or a module that is a file in `cwd`,
    becomes an absolute file path (an editor starts the agent from a directory of its own)."""
    source, attr = split_spec(spec)
    if is_file_source(source):
        return f"{os.path.abspath(os.path.join(cwd, os.path.expanduser(source)))}:{attr}"
    module_file = os.path.join(cwd, *source.split(".")) + ".py"
    if "." not in source and os.path.isfile(module_file):
        return f"{os.path.abspath(module_file)}:{attr}"
    return spec


def load_agent(spec: str) -> Agent:
    """Import what `spec` names and make an agent of it (an Agent subclass, a factory taking no
    arguments, or an instance), checked before any client connects.

    What the agent's code writes to stdout while it loads goes to stderr: stdout is the wire
    (or the JSON `editor-config` prints).
    """
    with _stdout_to_stderr():
        return _load(spec)


def _load(spec: str) -> Agent:
    source, attr = split_spec(spec)
    module = _import_file(source) if is_file_source(source) else _import_module(source)
    target: Any = module
    for part in attr.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise AgentSpecError(f"{source} has no attribute {attr!r}") from None
    agent = _instantiate(spec, target)
    if type(agent).prompt is Agent.prompt or not callable(getattr(agent, "prompt", None)):
        raise AgentSpecError(f"{spec}: {type(agent).__name__} does not implement prompt(turn), the method that runs a turn")
    return agent


def _import_module(name: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name and (name == exc.name or name.startswith(exc.name + ".")):
            raise AgentSpecError(f"cannot import {name}: no module of that name (run from the directory that holds it, "
                                 "or give path/to/file.py:ATTR)") from None
        raise _failed_import(name, exc) from None
    except (Exception, SystemExit) as exc:  # the agent's own module failed (or exited) at import: in one line
        raise _failed_import(name, exc) from None


def _import_file(path: str) -> ModuleType:
    """Import a .py file as a module named after it; its directory goes on sys.path so the
    modules beside it import as they would if it were run as a script."""
    path = os.path.abspath(os.path.expanduser(path))
    if not os.path.isfile(path):
        raise AgentSpecError(f"no such file: {path}")
    name = os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise AgentSpecError(f"cannot import {path}: not a Python source file")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, os.path.dirname(path))
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as exc:  # the agent's own module failed (or exited) at import: in one line
        del sys.modules[name]
        raise _failed_import(path, exc) from None
    return module


@contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """Point fd 1 (and so `print`, `os.write(1, ...)` and children) at stderr for the block."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        try:
            sys.stdout.flush()  # what the block printed goes out now, to stderr
        finally:
            os.dup2(saved, 1)
            os.close(saved)


def _failed_import(source: str, exc: BaseException) -> AgentSpecError:
    log.debug("importing %s failed", source, exc_info=exc)
    return AgentSpecError(f"cannot import {source}: {_one_line(exc)}")


def _instantiate(spec: str, target: Any) -> Agent:
    if isinstance(target, Agent):
        return target
    if isinstance(target, type) and not issubclass(target, Agent):
        raise AgentSpecError(f"{spec} is the class {target.__name__}, not an acp_green.Agent subclass")
    if not callable(target):
        raise AgentSpecError(f"{spec} is a {type(target).__name__}, not an acp_green.Agent subclass, factory or instance")
    needed = _required_parameters(target)
    if needed:
        what = f"{target.__name__}()" if isinstance(target, type) else f"{spec}"
        raise AgentSpecError(f"{what} needs arguments ({', '.join(needed)}); give an acp_green.Agent subclass or a factory "
                             "that needs none, or an Agent instance")
    try:
        agent = target()
    except (Exception, SystemExit) as exc:  # the agent's constructor or factory failed (or exited): in one line
        log.debug("creating the agent from %s failed", spec, exc_info=exc)
        raise AgentSpecError(f"creating the agent from {spec} failed: {_one_line(exc)}") from None
    if not isinstance(agent, Agent):
        raise AgentSpecError(f"{spec} gave a {type(agent).__name__}, not an acp_green.Agent")
    return agent


def _required_parameters(target: Any) -> list[str]:
    """Parameters a call with no arguments would leave unfilled ([] when the signature is unknown)."""
    try:
        signature = inspect.signature(target)
    except (TypeError, ValueError):
        return []
    return [
        name for name, p in signature.parameters.items()
        if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__

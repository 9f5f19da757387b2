"""The registry's manifest format (acp_green/tools/publish/format.py): a manifest is refused with
one problem per broken field, named by its dotted path; the boundaries of ids, versions and
distribution shapes are drawn by hypothesis against oracles written from the registry's rules."""

from __future__ import annotations

import copy
import re
from typing import Any

from hypothesis import given, settings, strategies as st

from acp_green.tools.publish.format import (PLATFORMS, Problem, auth_kind, auth_problem, npm_version, pypi_name,
                                            validate)
from acp_green.tools.publish.metadata import _authors, _short_license, pick_repository

VALID: dict[str, Any] = {
    "id": "hello-agent", "name": "Hello", "version": "1.2.3", "description": "A friendly agent",
    "repository": "https://example.com/hello", "authors": ["Ada <ada@example.com>"], "license": "MIT",
    "distribution": {"uvx": {"package": "hello-agent==1.2.3", "args": ["serve"]}},
}


def with_(**fields: Any) -> dict[str, Any]:
    return {**copy.deepcopy(VALID), **fields}


def fields_of(problems: list[Problem]) -> list[str]:
    return [p.field for p in problems]


def test_the_valid_manifest_passes():
    assert validate(VALID) == []


# -- ids ------------------------------------------------------------------------------------------

ID_ALPHABET = "abcxyz019-_.AZ é"


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=ID_ALPHABET, max_size=8))
def test_an_id_is_lowercase_letters_digits_and_hyphens_starting_with_a_letter(candidate: str):
    valid = bool(candidate) and candidate[0] in "abcxyz" and all(c in "abcxyz019-" for c in candidate)
    assert ("id" not in fields_of(validate(with_(id=candidate)))) is valid


# -- versions -------------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet="0123456789-+ab", max_size=3), min_size=1, max_size=5).map(".".join))
def test_a_version_is_three_numbers_first(candidate: str):
    parts = candidate.split(".")
    valid = len(parts) >= 3 and all(p and all(c in "0123456789" for c in p) for p in parts[:3])
    manifest = with_(version=candidate, distribution={"uvx": {"package": "hello-agent"}})
    assert ("version" not in fields_of(validate(manifest))) is valid


def test_a_pinned_package_must_pin_the_entrys_version():
    assert validate(with_(distribution={"uvx": {"package": "hello-agent==1.2.4"}})) == [
        Problem("distribution.uvx.package", "pins 1.2.4, not the entry's version 1.2.3")]
    assert fields_of(validate(with_(distribution={"npx": {"package": "@me/hello@2.0.0"}}))) == ["distribution.npx.package"]
    assert validate(with_(distribution={"npx": {"package": "@me/hello@1.2.3"}})) == []
    assert fields_of(validate(with_(distribution={"npx": {"package": "hello@latest"}}))) == ["distribution.npx.package"]


# -- distribution shapes --------------------------------------------------------------------------

package_entries = st.fixed_dictionaries(
    {"package": st.from_regex(r"[a-z][a-z0-9-]{0,8}", fullmatch=True)},
    optional={"args": st.lists(st.text(max_size=5), max_size=3),
              "env": st.dictionaries(st.from_regex(r"[A-Z]{1,4}", fullmatch=True), st.text(max_size=4), max_size=2)},
)
binary_target = st.fixed_dictionaries(
    {"archive": st.from_regex(r"https://example\.com/[a-z]{1,6}\.tar\.gz", fullmatch=True), "cmd": st.just("./agent")},
    optional={"args": st.lists(st.text(max_size=5), max_size=2)},
)
binaries = st.fixed_dictionaries({
    "darwin-aarch64": binary_target, "linux-x86_64": binary_target, "windows-x86_64": binary_target,
}, optional={"darwin-x86_64": binary_target, "linux-aarch64": binary_target, "windows-aarch64": binary_target})
distributions = st.fixed_dictionaries({}, optional={"uvx": package_entries, "npx": package_entries, "binary": binaries}).filter(bool)


@settings(max_examples=150, deadline=None)
@given(distributions)
def test_every_well_formed_distribution_passes(distribution: dict):
    assert validate(with_(distribution=distribution)) == []


def required_paths(manifest: dict) -> list[tuple[str, ...]]:
    """Every required field of this manifest, as a path of keys."""
    paths = [(name,) for name in ("id", "name", "version", "description", "distribution")]
    for kind, entry in manifest["distribution"].items():
        if kind == "binary":
            paths += [("distribution", "binary", platform, key) for platform in entry for key in ("archive", "cmd")]
        else:
            paths.append(("distribution", kind, "package"))
    return paths


@settings(max_examples=200, deadline=None)
@given(distributions, st.data())
def test_a_missing_required_field_is_named_as_required(distribution: dict, data: st.DataObject):
    manifest = with_(distribution=distribution)
    path = data.draw(st.sampled_from(required_paths(manifest)))
    holder = manifest
    for key in path[:-1]:
        holder = holder[key]
    del holder[path[-1]]
    assert validate(manifest) == [Problem(".".join(path), "required")]


@settings(max_examples=200, deadline=None)
@given(distributions, st.data(), st.from_regex(r"[a-z]{1,6}", fullmatch=True))
def test_a_field_the_format_does_not_have_is_named(distribution: dict, data: st.DataObject, extra: str):
    manifest = with_(distribution=distribution)
    closed = [("distribution",)] + [("distribution", kind) for kind in distribution if kind != "binary"]
    closed += [("distribution", "binary", platform) for platform in distribution.get("binary", {})]
    path = data.draw(st.sampled_from(closed))
    holder = manifest
    for key in path:
        holder = holder[key]
    if extra in holder or extra in ("uvx", "npx", "binary", "args", "env") or (path[-1] == "uvx" and extra == "cmd"):
        return  # a field the format has at this place
    holder[extra] = "x"
    [problem] = validate(manifest)
    assert problem.field == ".".join((*path, extra)) and problem.message.startswith("not a field of the format")


def test_a_binary_distribution_needs_every_operating_system_and_known_platforms():
    target = {"archive": "https://example.com/a.tgz", "cmd": "./a"}
    assert validate(with_(distribution={"binary": {"linux-x86_64": target}})) == [
        Problem("distribution.binary", "needs a build for every operating system: none for darwin, windows")]
    every = {platform: dict(target) for platform in PLATFORMS}
    assert validate(with_(distribution={"binary": every})) == []
    assert fields_of(validate(with_(distribution={"binary": {**every, "macos": target}}))) == ["distribution.binary.macos"]
    assert fields_of(validate(with_(distribution={"binary": {**every, "linux-x86_64": {**target, "archive": "https://x/latest/a.tgz"}}}))) == [
        "distribution.binary.linux-x86_64.archive"]


def test_shapes_and_types_are_named():
    assert validate([]) == [Problem("", "must be an object, not an array")]
    assert validate(with_(distribution={})) == [Problem("distribution", "must hold at least a distribution (uvx, npx or binary)")]
    assert validate(with_(authors="Ada")) == [Problem("authors", "must be an array, not a string")]
    assert validate(with_(authors=["Ada", 7])) == [Problem("authors.1", "must be a string, not a number")]
    assert fields_of(validate(with_(distribution={"uvx": {"package": "p", "x": 1, "y": 2}}))) == [
        "distribution.uvx.x", "distribution.uvx.y"]
    assert validate(with_(name="")) == [Problem("name", "must not be empty")]
    assert fields_of(validate(with_(repository="example.com/x"))) == ["repository"]


# -- what the registry reads of a spec and of authMethods ---------------------------------------


def test_package_specs_are_read_as_the_registry_reads_them():
    assert [pypi_name(s) for s in ("a-b==1.0.0", "a_b@1.0.0", "a[x]>=1", "plain")] == ["a-b", "a_b", "a", "plain"]
    assert [npm_version(s) for s in ("@s/p@1.0.0", "@s/p", "p@2.0.0", "p")] == ["1.0.0", None, "2.0.0", None]


def test_an_auth_methods_kind_is_its_type_else_its_meta_else_agent():
    assert [auth_kind(m) for m in ({"type": "env_var"}, {"_meta": {"terminal-auth": {}}}, {"_meta": {"agent-auth": 1}},
                                   {"id": "x"}, "x")] == ["env_var", "terminal", "agent", "agent", "not an object (str)"]
    assert auth_problem([{"id": "a", "name": "A"}]) is None
    assert auth_problem(None) is not None and auth_problem([]) is not None
    assert auth_problem([{"id": "k", "type": "env_var"}]) == "no method of type agent or terminal: found k (env_var)"


# -- what metadata gives -------------------------------------------------------------------------


def test_authors_come_from_author_email_then_author_names():
    assert _authors(["Grace, Ada"], ["Ada <ada@example.com>, bob@example.com"]) == (
        "Ada <ada@example.com>", "bob@example.com", "Grace")


def test_a_license_field_is_taken_only_when_it_is_an_identifier():
    assert _short_license("MIT") == "MIT"
    assert _short_license("Permission is hereby granted...\nTHE SOFTWARE IS PROVIDED") is None
    assert _short_license("UNKNOWN") is None


def test_the_repository_is_the_labelled_source_url_before_the_home_page():
    urls = [("Homepage", "https://example.com"), ("Source Code", "https://example.com/src")]
    assert pick_repository(urls) == "https://example.com/src"
    assert pick_repository(urls[:1]) == "https://example.com"
    assert pick_repository([("Docs", "https://example.com/docs")]) is None


def test_problem_reads_as_field_colon_message():
    assert str(Problem("distribution.uvx.package", "required")) == "distribution.uvx.package: required"
    assert re.fullmatch(r"manifest: .+", str(Problem("", "must be an object, not an array")))


def test_a_binary_archive_of_another_release_is_named_by_platform():
    """An archive URL naming a release (`/download/vX.Y/`) must name the entry's version, read as
    three parts (`v1.2` is 1.2.0); each platform whose archive names another release is named."""
    entry = with_(version="1.2.0")
    release = {platform: {"archive": "https://example.com/releases/download/v1.2/agent.tgz", "cmd": "./a"} for platform in PLATFORMS}
    assert validate({**entry, "distribution": {"binary": release}}) == []
    release["linux-x86_64"] = {"archive": "https://example.com/releases/download/v1.3.0/agent.tgz", "cmd": "./a"}
    assert validate({**entry, "distribution": {"binary": release}}) == [
        Problem("distribution.binary.linux-x86_64.archive", "is the release 1.3.0, not the entry's version 1.2.0")]

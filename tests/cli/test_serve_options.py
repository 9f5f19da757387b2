"""ServeOptions refuses a value the runtime cannot honour at the call site, naming the field: a
NaN grace would reach a gevent timer (the hub then serves nothing), a negative one means nothing."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from acp_green import ServeOptions

SECONDS = ("shutdown_grace", "cancel_grace", "idle_timeout", "block_warning")


@pytest.mark.parametrize("name", SECONDS)
@pytest.mark.parametrize("value", [math.nan, -0.5, "1", None, True])
def test_a_malformed_number_of_seconds_is_refused_naming_the_field(name, value):
    with pytest.raises((TypeError, ValueError), match=f"ServeOptions.{name} "):
        ServeOptions(**{name: value})


def test_only_the_cancel_grace_may_be_infinite():
    assert ServeOptions(cancel_grace=math.inf).cancel_grace == math.inf
    for name in ("shutdown_grace", "idle_timeout", "block_warning"):
        with pytest.raises(ValueError, match=f"ServeOptions.{name} must be a finite"):
            ServeOptions(**{name: math.inf})


@given(name=st.sampled_from(SECONDS), value=st.floats(allow_nan=True, allow_infinity=True))
def test_any_float_is_either_kept_as_given_or_refused_naming_the_field(name, value):
    valid = not math.isnan(value) and value >= 0 and (not math.isinf(value) or name == "cancel_grace")
    valid = valid and not (name == "idle_timeout" and value == 0)
    if valid:
        assert getattr(ServeOptions(**{name: value}), name) == value
    else:
        with pytest.raises(ValueError, match=f"ServeOptions.{name} "):
            ServeOptions(**{name: value})


@pytest.mark.parametrize(("name", "value"), [("max_background", 0), ("max_line_bytes", 100), ("max_mcp_servers", -1),
                                             ("max_protocol_version", 3), ("max_background", 2.5)])
def test_a_count_out_of_range_is_refused_naming_the_field(name, value):
    with pytest.raises(ValueError, match=f"ServeOptions.{name} "):
        ServeOptions(**{name: value})


SECONDS_OPTIONS = ["--shutdown-grace", "--cancel-grace", "--idle-timeout", "--block-warning", "--flush-stall-timeout",
                   "--connection-idle-timeout"]
# --cancel-grace inf is accepted (never interrupt): served in a subprocess by
# tests/cli/test_cancel_interrupts.py, not here, where serving would patch this process.
REFUSED = [(option, value) for option in SECONDS_OPTIONS for value in ("nan", "NaN", "inf")
           if (option, value) != ("--cancel-grace", "inf")]


@pytest.mark.parametrize(("option", "value"), REFUSED)
def test_the_command_line_refuses_nan_and_infinite_seconds_as_a_usage_error_naming_the_option(option, value):
    """NaN passes FloatRange's comparisons: without this it reached ServeOptions as a traceback
    (or a gevent timer). Only --cancel-grace may be inf."""
    from click.testing import CliRunner

    from acp_green.cli import cli

    done = CliRunner().invoke(cli, ["serve", option, value, "--ephemeral"], input="")
    assert done.exit_code == 2, done.output
    assert f"Invalid value for '{option}'" in done.output and "Traceback" not in done.output

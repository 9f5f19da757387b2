"""An agent that writes to stderr through every channel a Python process has, then fails."""

from __future__ import annotations

import itertools
import logging
import sys
import warnings

import gevent

from acp_green import Agent, Turn

_turns = itertools.count()


def _die_in_the_hub(n: int) -> None:
    raise RuntimeError(f"greenlet {n} died (reported by gevent's hub)")


class StderrFloodAgent(Agent):
    """Each turn: a stray print, sys.stdout and sys.stderr writes, a warning, a greenlet that
    dies (the hub prints it), a log line with a traceback, then the turn raises."""

    name = "stderr-flood"

    def prompt(self, turn: Turn) -> str:
        n = next(_turns)
        print(f"stray print {n} " + "p" * 200)
        sys.stdout.write(f"stray sys.stdout write {n}\n")
        sys.stderr.write(f"stray sys.stderr write {n}\n")
        warnings.warn(f"warning number {n}", RuntimeWarning, stacklevel=1)
        gevent.spawn(_die_in_the_hub, n).join()
        try:
            raise ValueError(f"logged failure {n}")
        except ValueError:
            logging.getLogger("stderr-flood").exception("turn %d logs a traceback", n)
        raise RuntimeError(f"turn {n} fails")

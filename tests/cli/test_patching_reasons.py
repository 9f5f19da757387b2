"""process/patching.reasons_not_to_patch names a thread already running: patching then would
leave it with unpatched blocking calls."""

from __future__ import annotations

import threading

from acp_green.process.patching import reasons_not_to_patch


def test_a_thread_already_running_is_a_reason_not_to_patch():
    release = threading.Event()
    worker = threading.Thread(target=release.wait, args=(30,), daemon=True)
    worker.start()
    try:
        assert any("other threads are running already" in reason for reason in reasons_not_to_patch())
    finally:
        release.set()
        worker.join(30)

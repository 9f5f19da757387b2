"""Tools built on the runtime (the rig: probe, soak, chat; the bench). The runtime never imports them."""

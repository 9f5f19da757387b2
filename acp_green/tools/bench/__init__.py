"""`acp-green bench`: workloads W1–W6 against acp_green and peer agents, side by side."""

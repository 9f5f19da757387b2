"""`acp-green bench`: W1–W6 of issue 6 against acp_green and peer agents, side by side."""

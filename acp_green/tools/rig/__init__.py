"""The multiprocess test rig: drive any stdio ACP agent and check what it does.

client (AcpClient and the PolicyAnswers it answers the agent with, AgentProcess; client_wire its
records, pending requests and reader; forwarding the fronts' collaborator surfaces), schema
(strict validation), invariants (checks on every run: invariant_findings, invariant_lines,
invariant_prompts), reaper (child subreaper, survivors), run (CheckedAgent), probe_turns (the
probe's v2 turns), scenario (composable steps),
probe (`acp-green probe`), soak (`acp-green soak`), chat (`acp-green chat`: chat_loop the prompt, keys and
sessions; chat_history stored sessions shown; chat_ask, chat_answers the questions; chat_files, chat_render,
chat_text), plot (matplotlib, optional).
"""

"""The multiprocess test rig: drive any stdio ACP agent and check what it does.

client (AcpClient, AgentProcess), schema (strict validation), invariants (checks on every run),
reaper (child subreaper, survivors), run (CheckedAgent), scenario (composable steps),
probe (`acp-green probe`), soak (`acp-green soak`), chat (`acp-green chat`: chat_loop the prompt, keys and
sessions; chat_history stored sessions shown; chat_ask, chat_answers the questions; chat_files, chat_render,
chat_text), plot (matplotlib, optional).
"""

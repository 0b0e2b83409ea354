"""The turn package: one `Turn` (types.py), started, run and finished by the `TurnManager` (manager.py), ended in
one transaction (end.py) or by recovery (recovery.py), with its history (history.py), its events (events.py) and
who awaits it (waiters.py). The loop itself keeps the design card's names: server/chat_flow_task_main.py and
server/chat_flow_tool_loop.py. See docs/ARCHITECTURE.md."""

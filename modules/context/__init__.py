"""An agent's context window: its budget per model, and the compacted view its model sees of a long history
(README, "Long conversations")."""

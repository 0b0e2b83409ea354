"""What the agents cost: the usage ledger, prices, per-user budgets (docs/API.md, "Usage and budgets")."""

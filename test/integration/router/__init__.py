"""Receiver-decided routing through the real server (docs/ARCHITECTURE.md): a shared server per module."""

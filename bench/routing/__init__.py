"""Parts of bench/router.py."""

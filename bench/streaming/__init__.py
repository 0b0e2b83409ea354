"""bench/load.py's parts: the bare relay it measures the product against, its targets, its report."""

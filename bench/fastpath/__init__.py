"""Parts of bench/fast_path.py: the labelled sets, their simulation, the replay on a real server, latency."""

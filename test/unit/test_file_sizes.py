"""No Python file of the repository is over 400 lines (docs/ARCHITECTURE.md): past that, split it by concern."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 400


def test_no_python_file_over_the_limit():
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.py"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.split()
    files = [ROOT / name for name in listed if (ROOT / name).is_file() and not name.startswith("frontend/")]
    assert len(files) > 100
    too_long = {str(f.relative_to(ROOT)): n for f in files if (n := len(f.read_text().splitlines())) > LIMIT}
    assert too_long == {}

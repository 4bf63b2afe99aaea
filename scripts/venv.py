#!/usr/bin/env python3
"""Create the project's virtualenv with a Python >= 3.11 (the first one found on this machine)."""

import shutil
import subprocess
import sys
from pathlib import Path

CANDIDATES = ("python3.13", "python3.12", "python3.11", "python3")


def main() -> int:
    target = Path(sys.argv[1] if len(sys.argv) > 1 else ".venv")
    if (target / "bin" / "python").exists():
        return 0
    for name in CANDIDATES:
        exe = shutil.which(name)
        if not exe:
            continue
        probe = subprocess.run([exe, "-c", "import sys; print(sys.version_info >= (3, 11))"],
                               capture_output=True, text=True, check=False)
        if probe.stdout.strip() == "True":
            subprocess.run([exe, "-m", "venv", str(target)], check=True)
            return 0
    sys.exit("No Python >= 3.11 found: install python3.11 (Debian: apt-get install python3) "
             "and run again.")


if __name__ == "__main__":
    sys.exit(main())

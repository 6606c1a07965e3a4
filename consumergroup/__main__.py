"""``python -m consumergroup``: the same command as ``consumergroup``."""

from __future__ import annotations

from .cli import main

if __name__ == "__main__":
    main(prog_name="consumergroup")

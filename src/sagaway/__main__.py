from __future__ import annotations

from sagaway.cli.main import main

main()

"""The order lab on Sagaway: the same as `sagaway demo lab`.

    python examples/order_lab/run.py            # all five experiments, logs and table
    python examples/order_lab/run.py -e 2 -q    # experiment 2, table only
    python examples/order_lab/run.py --json

The lab's code lives in the package (src/sagaway/lab/) so that `sagaway demo lab` works after
`pip install sagaway`; read it there: clock.py, services.py, saga.py, experiments.py.
"""

from __future__ import annotations

from sagaway.cli.lab import lab

if __name__ == "__main__":
    lab(prog_name="run.py")

"""The seed of a notebook's experiments, and the numbers they report for the reference tables.

Every experiment of the notebooks ends with a "What you should see" table: the mean and spread of
its headline numbers over three seeds, measured by the course with
``python benchmarks/reference_values.py``. That script runs each notebook with ``WEEK6_SEED`` set
to 0, 1 and 2, and ``WEEK6_RECORD`` naming a file where :func:`record` writes what each experiment
measured. In your own notebook neither variable is set: the seed is 0 and :func:`record` does
nothing. Set ``WEEK6_SEED`` before starting Jupyter to see how much your numbers move with it.
"""
from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping

SEED_VARIABLE = "WEEK6_SEED"
RECORD_VARIABLE = "WEEK6_RECORD"


def experiment_seed(default: int = 0) -> int:
    """The seed of this run's experiments: ``$WEEK6_SEED`` when set, else ``default``."""
    raw = os.environ.get(SEED_VARIABLE, "").strip()
    if not raw:
        return default
    try:
        seed = int(raw)
    except ValueError:
        raise ValueError(f"{SEED_VARIABLE}={raw!r} is not a whole number: set it to a seed such as 0, 1 or 2, "
                         f"or unset it for the default seed {default}") from None
    if seed < 0:
        raise ValueError(f"{SEED_VARIABLE}={seed} is negative: torch and datasets need a seed of 0 or more")
    return seed


def record(experiment: str, values: Mapping[str, float]) -> None:
    """Note an experiment's headline numbers for the reference tables (a no-op unless
    ``$WEEK6_RECORD`` names a file).

    Args:
        experiment: the name of the experiment's table, for example ``"B3 learning rate"``; the
            notebook's "What you should see" cell for that table carries the same name.
        values: row label -> number, in the order the table lists them.
    """
    path = os.environ.get(RECORD_VARIABLE)
    if not path:
        return
    numbers = {}
    for label, value in values.items():
        number = float(value)  # tensors, numpy scalars and Python numbers alike
        if not math.isfinite(number):
            number = None  # JSON has no NaN; a diverged run is recorded as missing, not as a number
        numbers[str(label)] = number
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"experiment": experiment, "values": numbers}) + "\n")

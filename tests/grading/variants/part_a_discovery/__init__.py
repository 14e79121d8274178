"""Stand-in students for the hidden suite of part_a_discovery.ipynb, in one section."""
from __future__ import annotations

from .. import gathered
from . import part_a_discovery

MUTANTS, ALTERNATIVES, EXTRA_NAMESPACE, __getattr__ = gathered(part_a_discovery)

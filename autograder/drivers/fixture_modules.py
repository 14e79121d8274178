"""The modules every fixture declares, imported: a zygote's last preload.

A zygote imports this after :data:`autograder.drivers.WORKER_MODULES`, so that no
worker forked from it imports a model's code again. The zygote works the list out
itself, inside the sandbox; the process that starts it need not import torch.
"""
from __future__ import annotations

import importlib

from autograder.drivers import models  # noqa: F401  (registers the fixtures and their imports)
from autograder.sandbox.fixtures import fixture_imports

for _name in fixture_imports():
    importlib.import_module(_name)

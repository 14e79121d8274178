"""What several sections' stand-ins of part_b_bert_gpt.ipynb share."""
from __future__ import annotations


def _on_cpu(function):
    """``function`` with its tensors moved to the CPU: wrong only where the result must stay on a GPU."""
    def moved(*args, **kwargs):
        result = function(*args, **kwargs)
        return tuple(r.cpu() for r in result) if isinstance(result, tuple) else result.cpu()
    return moved

"""The hidden suite of exercise5_span_corruption.ipynb, in one section."""

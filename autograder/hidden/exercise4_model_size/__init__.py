"""The hidden suite of exercise4_model_size.ipynb, in one section."""

"""The hidden suite of exercise3_classification_as_generation.ipynb, in one section."""

"""The hidden suite of exercise1_masked_predictions.ipynb, in one section."""

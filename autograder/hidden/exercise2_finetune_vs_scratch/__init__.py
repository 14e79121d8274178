"""The hidden suite of exercise2_finetune_vs_scratch.ipynb, in one section."""

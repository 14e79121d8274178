"""Toy-scale pre-training for Week 6: one corpus, one budget, two objectives.

The course cannot download a masked-LM checkpoint (there is no model hub), so it
pre-trains its own, small enough for a laptop CPU:

- ``tokenizer``  a WordPiece vocabulary trained on the Austen training text;
- ``data``       the corpus as one stream of token ids, cut into fixed windows;
- ``model``      a small BERT (masked LM) and a small GPT-2 (causal LM) of the same shape;
- ``train``      one training loop for both objectives, with a loss-vs-tokens log;
- ``evaluate``   held-out losses and the cloze test, written into the model cards;
- ``card``       the model cards (README.md) and SHA256SUMS of the checkpoint folders.

Run each as a module from the repository root, e.g. ``python -m week6_pretraining.train``.
"""

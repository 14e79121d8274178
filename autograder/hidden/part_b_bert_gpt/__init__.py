"""Hidden tests of part_b_bert_gpt.ipynb: MLM corruption, attention, the two
pre-training losses, decoding, and the BERT encoder assembled from the attention.

Every test builds its inputs from fixed seeds, calls the student's code through
``student`` (the sandbox), computes the expected answer with
``autograder.reference`` in this process, and compares with the tolerance written
next to the comparison. Random functions get a ``torch.Generator`` built in the
sandbox by the ``seeded_call`` probe and are judged by frequencies, with the bounds
stated next to the checks (5 standard deviations for sampling, Bernstein's
inequality for masking): a correct solution fails one of these checks with a
probability far below one in a million. The reference decodings are deterministic
and only read their model, so each model, each decoding and each forward pass is computed
once per grading process.
"""

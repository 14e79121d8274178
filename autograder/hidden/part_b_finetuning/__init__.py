"""Hidden tests of part_b_finetuning.ipynb: the learning-rate schedule, layer
freezing, the training and evaluation loops, LoRA, bottleneck adapters, the
trainable-parameter counts of LoRA, adapters, prompt tuning and BitFit, and the
cost arithmetic.

Stateful code (loops over a model, modules) is driven inside the sandbox by the
probes of ``autograder.drivers.probes``; the very same driver runs here with
the reference implementation on an identical, seeded model, and the two records
are compared. A record of the reference depends only on those seeded inputs, so
it is computed once per grading process (``_once``). The answer constants of this notebook (architecture table, model
for task, fine-tuning configuration, generation settings) are graded elsewhere.
"""

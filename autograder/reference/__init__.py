"""Reference implementations for the Week 6 auto-grader (pre-trained language models).

One small module per topic; each function's docstring is the contract that the
students' notebook stubs repeat and that the hidden tests check:

- ``attention``        softmax, causal masks, scaled dot-product attention
- ``masking``          BERT's masked-language-model corruption (80/10/10), and whole-word masking
                       (a pre-training recipe, not graded)
- ``losses``           causal (next-token) and masked language-model losses
- ``decoding``         temperature / top-k / top-p sampling, greedy and beam search
- ``encoder``          BERT's encoder assembled from the attention: multi-head self-attention,
                       the post-LN layer, embeddings and layers from a BertModel state dict
- ``span_corruption``  T5's random span noise and sentinel targets
- ``finetuning``       learning-rate schedule, layer freezing, train / evaluate loops
- ``lora``             low-rank adaptation (LoRA) of linear layers
- ``adapters``         bottleneck adapters, and what LoRA, adapters, prompt tuning and BitFit train
- ``sentence_pairs``   BERT's [CLS] A [SEP] B [SEP] input and next-sentence-prediction examples
- ``scoring``          a causal LM's sequence log-probability and top next tokens;
                       a masked LM's top predictions at each [MASK]
- ``arithmetic``       the handout's pen-and-paper exercises
"""

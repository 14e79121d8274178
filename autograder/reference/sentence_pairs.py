"""BERT's input for a pair of segments, and the examples of next-sentence prediction
(Devlin et al., 2019, sections 3.1 and A.1).

BERT reads two segments at once, ``[CLS] A [SEP] B [SEP]``, and tells them apart by a
second embedding, the token type (segment) id: 0 for ``[CLS]``, A and the first
``[SEP]``, 1 for B and the last ``[SEP]``. Its second pre-training task, next-sentence
prediction (NSP), labels each pair from the final ``[CLS]`` vector: half of the time B
is the sentence that really follows A in the corpus (IsNext), half of the time a
sentence taken at random from another document (NotNext).
"""

import torch

IS_NEXT, NOT_NEXT = 0, 1  # the labels of transformers' BertForPreTraining (next_sentence_label)


def bert_pair_input(
    tokens_a: list[int], tokens_b: list[int], *, cls_id: int, sep_id: int, max_length: int
) -> dict[str, torch.Tensor]:
    """BERT's input for the segment pair (A, B): ``[CLS] A [SEP] B [SEP]``, truncated to fit.

    Args:
        tokens_a, tokens_b: the two segments' token ids (Python lists of ints, each with at
            least one id, without special tokens). Not modified.
        cls_id, sep_id: the ids of ``[CLS]`` and ``[SEP]``.
        max_length: the most tokens the result may have, the three special tokens included;
            at least 5 (one token of each segment must fit).

    Returns:
        ``{"input_ids", "token_type_ids", "attention_mask"}``, each a LongTensor [L] on the CPU:

        - ``input_ids``: ``[CLS]``, A, ``[SEP]``, B, ``[SEP]``;
        - ``token_type_ids``: 0 for ``[CLS]``, A and the first ``[SEP]``; 1 for B and the last
          ``[SEP]``;
        - ``attention_mask``: all ones (no padding).

    Truncation, "longest first", when the segments do not fit in the m = ``max_length - 3``
    places left by the special tokens: if the shorter segment fits in half of them (2 * its
    length <= m), it is kept whole and the longer one is cut to the remaining m - length;
    otherwise both are cut to m // 2 tokens, and when m is odd the segment that was longer
    (B, when they were equally long) keeps one more. Cutting keeps a segment's first tokens.
    This is what ``transformers``' ``BertTokenizer`` does with ``truncation="longest_first"``.

    Raises:
        ValueError: a segment is empty, or ``max_length < 5``.
    """
    if not tokens_a or not tokens_b:
        raise ValueError("both segments need at least one token")
    if max_length < 5:
        raise ValueError(f"max_length must be at least 5 ([CLS], [SEP] twice and a token of each), "
                         f"got {max_length}")
    room = max_length - 3
    keep_a, keep_b = len(tokens_a), len(tokens_b)
    if keep_a + keep_b > room:
        b_is_longer = keep_b >= keep_a
        shorter = keep_a if b_is_longer else keep_b
        if 2 * shorter <= room:
            kept = (shorter, room - shorter)
        else:
            kept = (room // 2, room // 2 + room % 2)
        keep_a, keep_b = kept if b_is_longer else kept[::-1]
    a, b = list(tokens_a[:keep_a]), list(tokens_b[:keep_b])
    ids = [cls_id, *a, sep_id, *b, sep_id]
    types = [0] * (len(a) + 2) + [1] * (len(b) + 1)
    return {
        "input_ids": torch.tensor(ids, dtype=torch.long),
        "token_type_ids": torch.tensor(types, dtype=torch.long),
        "attention_mask": torch.ones(len(ids), dtype=torch.long),
    }


def make_nsp_pairs(
    documents: list[list[str]], generator: torch.Generator
) -> list[tuple[str, str, int]]:
    """The next-sentence-prediction examples of a corpus: one per pair of neighbouring sentences.

    Args:
        documents: the corpus, a list of documents, each a list of sentences (strings); at
            least two documents, since a NotNext sentence comes from another document. Not
            modified.
        generator: a CPU ``torch.Generator``, the source of all randomness: the same state
            gives the same examples.

    Returns:
        A list of ``(A, B, label)``, one for every document d and every i from 0 to
        len(d) - 2, in that order (documents in order, then i): A is ``d[i]``, and

        - with probability 1/2, B is ``d[i + 1]`` and the label is 0 (IsNext);
        - otherwise B is a sentence drawn uniformly at random from the sentences of all the
          *other* documents (each sentence of theirs equally likely) and the label is 1 (NotNext).

        The coin of each example is independent of the others'. A document of one sentence
        gives no example (but its sentence can be drawn as a NotNext B).

    Raises:
        ValueError: fewer than two documents, or a document without sentences.
    """
    if len(documents) < 2:
        raise ValueError("NotNext sentences come from another document: give at least two documents")
    if any(len(document) == 0 for document in documents):
        raise ValueError("every document needs at least one sentence")
    sizes = [len(document) for document in documents]
    total = sum(sizes)
    examples = []
    for d, document in enumerate(documents):
        others = total - sizes[d]
        for i in range(len(document) - 1):
            if torch.rand((), generator=generator) < 0.5:
                examples.append((document[i], document[i + 1], IS_NEXT))
                continue
            # the k-th sentence of the other documents, counted in order, skipping document d
            k = int(torch.randint(others, (), generator=generator))
            for e, other in enumerate(documents):
                if e == d:
                    continue
                if k < len(other):
                    examples.append((document[i], other[k], NOT_NEXT))
                    break
                k -= len(other)
    return examples

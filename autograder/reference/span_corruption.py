"""T5's span-corruption objective (Raffel et al., 2020, section 3.1.4).

Instead of masking single tokens (BERT), T5 drops contiguous *spans* of tokens,
replaces each dropped span in the input by one sentinel token, and asks the
decoder to write out only the dropped spans, each introduced by its sentinel:

    original: Thank you for inviting me to your party last week
    inputs:   Thank you <X> me to your party <Y> week
    targets:  <X> for inviting <Y> last <Z>

(<X>, <Y>, <Z> are T5's <extra_id_0>, <extra_id_1>, <extra_id_2>.) The targets
are short, so each training step is cheap, yet every dropped token is predicted.
"""

from collections.abc import Sequence

import torch


def _random_segmentation(num_items: int, num_segments: int, generator, device) -> torch.Tensor:
    """Lengths [num_segments] of a uniformly random split of num_items into positive parts.

    Cutting after a random (num_segments - 1)-subset of the num_items - 1 gaps
    between items gives every composition the same probability; the subset is
    one shuffle (``torch.randperm``) of an indicator, as in the t5 code base.
    """
    is_cut = torch.arange(num_items - 1, device=device) < num_segments - 1
    is_cut = is_cut[torch.randperm(num_items - 1, generator=generator, device=device)]
    segment_id = torch.cat([is_cut.new_zeros(1), is_cut]).long().cumsum(dim=0)  # [num_items]
    return torch.bincount(segment_id, minlength=num_segments)


def random_spans_noise_mask(
    length: int,
    *,
    noise_density: float = 0.15,
    mean_span_length: float = 3.0,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Which tokens T5 drops: random spans covering ``noise_density`` of the sequence.

    The counts are deterministic, only the positions are random (the t5 code
    base's ``random_spans_noise_mask``):

    - num_noise = round(length * noise_density), clipped to [1, length - 1]
      (at least one token is dropped and at least one is kept);
    - num_spans = max(1, round(num_noise / mean_span_length)), further capped at
      num_noise and at length - num_noise so that every span below is
      non-empty (the cap never binds with T5's settings 0.15 and 3);
    - the num_noise noise tokens are split into num_spans random positive
      lengths, and so are the length - num_noise kept tokens;
    - the mask alternates kept span, noise span, kept span, noise span, ...:
      it always starts with kept tokens and ends with noise.

    ``round`` is Python's: float64 arithmetic, halves round to even (so
    length 10 gives round(1.5) = 2 noise tokens, length 30 gives round(4.5) = 4).

    Args:
        length: number of tokens, >= 2 (ValueError otherwise).
        noise_density: fraction of tokens to drop.
        mean_span_length: average number of tokens per dropped span.
        generator: source of randomness (None: the global generator). Draws,
            in order: ``torch.randperm(num_noise - 1)`` to split the noise tokens,
            then ``torch.randperm(length - num_noise - 1)`` to split the kept
            tokens, both on the generator's device.

    Returns:
        BoolTensor [length], True at dropped (noise) tokens, on the generator's
        device (CPU when None). Exactly num_noise entries are True, grouped in
        exactly num_spans runs.

    Not graded: the draws themselves. A mask is judged by its counts, its layout, its
    reproducibility with one generator and the distribution of its spans.
    """
    if length < 2:
        raise ValueError(f"span corruption needs length >= 2, got {length}")
    device = generator.device if generator is not None else torch.device("cpu")
    num_noise = min(max(round(length * noise_density), 1), length - 1)
    num_kept = length - num_noise
    num_spans = min(max(round(num_noise / mean_span_length), 1), num_noise, num_kept)

    noise_lengths = _random_segmentation(num_noise, num_spans, generator, device)
    kept_lengths = _random_segmentation(num_kept, num_spans, generator, device)
    # [kept_0, noise_0, kept_1, noise_1, ...] run lengths of the pattern F, T, F, T, ...
    run_lengths = torch.stack([kept_lengths, noise_lengths], dim=1).flatten()
    run_is_noise = torch.arange(2 * num_spans, device=device) % 2 == 1
    return run_is_noise.repeat_interleave(run_lengths)


def span_corrupt(
    token_ids: torch.Tensor,
    noise_mask: torch.Tensor,
    *,
    sentinel_ids: Sequence[int] | torch.Tensor,
    eos_id: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Build T5's (inputs, targets) pair from a sequence and its noise mask.

    Args:
        token_ids: integer tensor [T] (LongTensor in practice).
        noise_mask: BoolTensor [T], True at dropped tokens. A *span* is a
            maximal run of consecutive True entries; say there are S of them.
        sentinel_ids: the sentinel ids in order of use, at least S + 1 of them
            (T5: <extra_id_0>, <extra_id_1>, ... = 32099, 32098, ...).
            Fewer raises ValueError.
        eos_id: optional end-of-sequence id appended to both outputs.

    Returns:
        (inputs, targets), 1-D, with the dtype and device of ``token_ids``:

        - inputs: the kept tokens in order, with span i replaced by the single
          token sentinel_ids[i];
        - targets: for each span i in order, sentinel_ids[i] followed by the
          tokens of span i; then one final sentinel, sentinel_ids[S], which
          marks the end of the last span.

        len(inputs) = T - num_noise + S and len(targets) = num_noise + S + 1
        (+1 each with eos). Deterministic.

    Worked example: the words of "Thank you for inviting me to your party last
    week" as ids 0..9, noise_mask True at "for", "inviting" and "last", and
    sentinel ids 100, 101, 102 standing for <X>, <Y>, <Z>::

        token_ids  = [  0,   1,   2,        3,  4,  5,    6,     7,    8,    9]
                     Thank you  for  inviting  me  to  your  party  last  week
        noise_mask = [  F,   F,   T,        T,  F,  F,    F,     F,    T,    F]
        inputs     = [0, 1, 100, 4, 5, 6, 7, 101, 9]   Thank you <X> me to your party <Y> week
        targets    = [100, 2, 3, 101, 8, 102]           <X> for inviting <Y> last <Z>

    Note: the t5 code base builds the targets by applying the same replacement
    to the kept spans, so it emits a sentinel per *kept* span; that equals the
    rule above whenever the sequence starts and ends with kept tokens (as in the
    example) but omits the final sentinel when it ends with noise.
    """
    noise_mask = noise_mask.to(device=token_ids.device, dtype=torch.bool)
    previous_is_noise = torch.cat([noise_mask.new_zeros(1), noise_mask[:-1]])
    span_start = noise_mask & ~previous_is_noise
    num_spans = int(span_start.sum())

    sentinels = torch.as_tensor(sentinel_ids, dtype=token_ids.dtype, device=token_ids.device).flatten()
    if num_spans + 1 > len(sentinels):
        raise ValueError(f"{num_spans} spans need {num_spans + 1} sentinel ids, got {len(sentinels)}")

    # Give every position two slots, [sentinel-if-a-span-starts-here, its token],
    # and read the kept slots in row-major order: a span's sentinel then lands
    # right where the span began.
    span_index = (span_start.long().cumsum(dim=0) - 1).clamp(min=0)
    slots = torch.stack([sentinels[span_index], token_ids], dim=1)  # [T, 2]
    inputs = slots[torch.stack([span_start, ~noise_mask], dim=1)]
    targets = slots[torch.stack([span_start, noise_mask], dim=1)]
    targets = torch.cat([targets, sentinels[num_spans : num_spans + 1]])

    if eos_id is not None:
        eos = token_ids.new_full((1,), eos_id)
        inputs, targets = torch.cat([inputs, eos]), torch.cat([targets, eos])
    return inputs, targets


IGNORE_INDEX = -100  # target value of padding: not scored


def span_corruption_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """The span-corruption loss of each sequence of a batch (T5's pre-training objective):
    L_span = -sum_{t=1}^{|y|} log P(y_t | y_<t, x_corrupt).

    Args:
        logits: [B, L, V] decoder scores under teacher forcing, any floating dtype.
            ``logits[b, t]`` is the decoder's prediction *of* ``targets[b, t]``: the
            decoder read the corrupted input through cross-attention and, on its own
            side, the start token followed by ``targets[b, :t]``. The shift is already
            done: score ``logits[b, t]`` against ``targets[b, t]`` (unlike ``clm_loss``,
            where ``logits[:, t]`` predicts the token at t + 1).
        targets: LongTensor [B, L], ``span_corrupt``'s targets, right-padded with -100;
            a -100 is not scored.

    Returns:
        FloatTensor [B], one value per row, float32 whatever the logits' dtype, on the
        device of ``logits``: for each row b, the sum over its scored positions t of
        -log softmax(logits[b, t]) evaluated at targets[b, t]; 0.0 (not NaN) for a row
        with nothing scored. A sum, not a mean: a row with more targets weighs more.
        Divide the batch's total by the number of scored targets for the mean per
        target token that training minimises. Computed in float32 with a log-softmax
        that stays finite for large logits.

    torch.log_softmax, torch.nn.functional.cross_entropy and torch.nn.functional.nll_loss
    may be used.

    Not graded: gradients.
    """
    # float32 before the softmax: in float16 or bfloat16 most of a rare token's
    # probability is lost to rounding.
    log_probs = torch.log_softmax(logits.float(), dim=-1)
    targets = targets.to(logits.device)
    scored = targets != IGNORE_INDEX
    picked = log_probs.gather(-1, targets.clamp(min=0).unsqueeze(-1)).squeeze(-1)  # [B, L]
    return -picked.masked_fill(~scored, 0.0).sum(dim=1)

"""Hidden tests of part_b_finetuning.ipynb, B6.5, B4 and B5: the cost arithmetic, and the answer
constants (architecture table, model for task, fine-tuning configuration, generation settings)."""
from __future__ import annotations

from autograder.reference import answers, arithmetic
from autograder.suite import drawn_ints, expect, graded

from ._common import _expect_dict_close


# =============================================================== fine_tuning_footprint
@graded("test_fine_tuning_footprint")
def test_fine_tuning_footprint_against_gpt3(student):
    for energy in (1287.0, 1.5, 0.02, drawn_ints(69, 1, 10 ** 6)[0] / 64):
        # public: the release's visible test shows the reference run itself (1287 MWh)
        _expect_dict_close(student.call(energy), arithmetic.fine_tuning_footprint(energy), rel=1e-9,
                           what=f"fine_tuning_footprint({energy})", public=energy == 1287.0)


@graded("test_fine_tuning_footprint")
def test_fine_tuning_footprint_other_reference_run(student):
    reference_run = dict(ref_energy_mwh=50.0, ref_co2_tonnes=20.0, ref_cost_usd=1e5)
    for energy in (5.0, 75.0):
        _expect_dict_close(student.call(energy, **reference_run),
                           arithmetic.fine_tuning_footprint(energy, **reference_run), rel=1e-9,
                           what=f"fine_tuning_footprint({energy}, ref_energy_mwh=50, ref_co2_tonnes=20, "
                                "ref_cost_usd=1e5)")


# ------------------------------------------------------------------ answer constants (B4, B5)
def _constant(student, name: str) -> dict:
    value = student.value(name)
    expect(type(value) is dict, f"{name} must be a dict, got {type(value).__name__}")
    return value


def _mismatches(name: str, given: dict, keys) -> list[str]:
    return [key for key in keys if given.get(key) not in answers.accepted(name, key)]


def _not_right(wrong: list[str], items) -> str:
    """How many of ``items`` are wrong, never which: of a choice among a few, which is the answer key."""
    return f"{len(wrong)} of the {len(items)} entries {'is' if len(wrong) == 1 else 'are'} not right yet"


def _expect_row(table: dict, model: str) -> None:
    """``model``'s row of ARCHITECTURE_TABLE is a dict with every entry of the key's row right."""
    row, key = table.get(model), answers.ARCHITECTURE_TABLE[model]
    expect(type(row) is dict, f"ARCHITECTURE_TABLE[{model!r}] must be a dict")
    wrong = [c for c, v in key.items() if row.get(c) != v]
    expect(not wrong, f"ARCHITECTURE_TABLE[{model!r}]: {_not_right(wrong, key)}",
           detail=f"ARCHITECTURE_TABLE[{model!r}]: {', '.join(wrong)} not right yet")


@graded("test_architecture_table")
def test_architecture_table_bert_and_gpt(student):
    table = _constant(student, "ARCHITECTURE_TABLE")
    for model in ("BERT", "GPT"):
        _expect_row(table, model)


@graded("test_architecture_table")
def test_architecture_table_t5(student):
    _expect_row(_constant(student, "ARCHITECTURE_TABLE"), "T5")


def _expect_tasks(student, tasks: list[str], hint: str = "") -> None:
    """MODEL_FOR_TASK gives the key's model for each of ``tasks``; ``hint`` says what those tasks share."""
    wrong = _mismatches("MODEL_FOR_TASK", _constant(student, "MODEL_FOR_TASK"), tasks)
    expect(not wrong, f"MODEL_FOR_TASK: {_not_right(wrong, tasks)}{hint}", detail=f"MODEL_FOR_TASK: reconsider {wrong}")


@graded("test_model_for_task")
def test_model_for_task_understanding(student):
    _expect_tasks(student, ["sentiment analysis", "named entity recognition"], " (a label per input or per token)")


@graded("test_model_for_task")
def test_model_for_task_generation_and_qa(student):
    _expect_tasks(student, ["text generation", "question answering"])


@graded("test_model_for_task")
def test_model_for_task_sequence_to_sequence(student):
    _expect_tasks(student, ["translation", "summarization"], " (a whole input becomes a new output text)")


# The accepted ranges are the answer key: a message points to the handout instead of quoting them.
SEE_B5 = "(see the handout's B5 table of typical values)"


def _expect_in_range(config: dict, key: str, *, sound_range: str = "the sound range", quoted: bool = True) -> None:
    """FINETUNE_CONFIG[key] is a number in the key's range. The message names the range only as
    ``sound_range`` and points to the handout; when ``quoted``, it repeats the student's value."""
    low, high = answers.FINETUNE_RANGES[key]
    value = config.get(key)
    given = f" = {value!r}" if quoted else ""
    expect(type(value) in (int, float) and low <= value <= high,
           f"FINETUNE_CONFIG[{key!r}]{given} is outside {sound_range} {SEE_B5}",
           detail=f"FINETUNE_CONFIG[{key!r}] = {value!r} is outside [{low:g}, {high:g}]")


@graded("test_finetune_config")
def test_finetune_config_learning_rate_and_warmup(student):
    config = _constant(student, "FINETUNE_CONFIG")
    for key in ("learning_rate", "warmup_ratio"):
        _expect_in_range(config, key, sound_range="the sound range for fine-tuning a pre-trained encoder")


@graded("test_finetune_config")
def test_finetune_config_batch_and_epochs(student):
    config = _constant(student, "FINETUNE_CONFIG")
    for key in ("per_device_train_batch_size", "num_train_epochs"):
        expect(type(config.get(key)) is int, f"FINETUNE_CONFIG[{key!r}] must be an int")
        _expect_in_range(config, key)


@graded("test_finetune_config")
def test_finetune_config_regularisation(student):
    config = _constant(student, "FINETUNE_CONFIG")
    _expect_in_range(config, "weight_decay", quoted=False)
    expect(type(config.get("freeze_embeddings")) is bool, "FINETUNE_CONFIG['freeze_embeddings'] must be True or False")


@graded("test_generation_settings")
def test_generation_settings_greedy_and_sampling(student):
    settings = _constant(student, "GENERATION_SETTINGS")
    greedy, sampling = settings.get("greedy"), settings.get("sampling")
    expect(type(greedy) is dict and type(sampling) is dict, "GENERATION_SETTINGS needs dicts for greedy and sampling")
    expect(greedy.get("do_sample", False) is False and greedy.get("num_beams", 1) == 1,
           "greedy decoding neither samples nor keeps several beams")
    temperature = sampling.get("temperature", 1.0)
    expect(sampling.get("do_sample") is True, "sampling needs do_sample=True")
    expect(type(temperature) in (int, float) and 0 < temperature <= 2,
           f"a sampling temperature of {temperature!r} is not a sound one (handout B5, and the temperatures of "
           "part_b_bert_gpt)",
           detail=f"a sampling temperature of {temperature!r} is outside (0, 2]")


@graded("test_generation_settings")
def test_generation_settings_beam(student):
    beam = _constant(student, "GENERATION_SETTINGS").get("beam")
    expect(type(beam) is dict, "GENERATION_SETTINGS['beam'] must be a dict")
    beams = beam.get("num_beams")
    expect(type(beams) is int and 2 <= beams <= 10, f"beam search needs a few beams (an int num_beams), got "
                                                     f"{beams!r}", detail=f"beam search needs num_beams in [2, 10], "
                                                                          f"got {beams!r}")
    expect(beam.get("do_sample", False) is False, "plain beam search does not sample")

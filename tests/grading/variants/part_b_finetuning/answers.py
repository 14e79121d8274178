"""Stand-in students for the answers section of part_b_finetuning.ipynb (B6.5, B4, B5): the cost
arithmetic and the answer constants."""
from __future__ import annotations

from autograder.reference import answers, arithmetic


def footprint_inverted_savings(energy_mwh, **kwargs):
    result = arithmetic.fine_tuning_footprint(energy_mwh, **kwargs)
    return {**result, "savings_fraction": 1.0 - result["savings_fraction"]}


def _edited(constant: dict, **changes) -> dict:
    return {**constant, **changes}


ARCHITECTURE_TABLE_T5_AS_DECODER = _edited(
    answers.ARCHITECTURE_TABLE, T5={**answers.ARCHITECTURE_TABLE["T5"], "architecture": "decoder"})
MODEL_FOR_TASK_ALL_BERT = {task: "BERT" for task in answers.MODEL_FOR_TASK}
FINETUNE_CONFIG_FROM_SCRATCH_LR = _edited(answers.FINETUNE_CONFIG, learning_rate=1e-2)
GENERATION_SETTINGS_ONE_BEAM = _edited(answers.GENERATION_SETTINGS, beam={"do_sample": False, "num_beams": 1})


def footprint_inverted_ratio(energy_mwh, *, ref_energy_mwh=1287, ref_co2_tonnes=552, ref_cost_usd=4.6e6):
    ratio = ref_energy_mwh / energy_mwh
    return {"co2_tonnes": ratio * ref_co2_tonnes, "cost_usd": ratio * ref_cost_usd, "savings_fraction": 1.0 - ratio}


def footprint_ignores_reference_run(energy_mwh, **kwargs):
    return arithmetic.fine_tuning_footprint(energy_mwh)


def footprint_extra_key(energy_mwh, **kwargs):
    return {**arithmetic.fine_tuning_footprint(energy_mwh, **kwargs), "energy_mwh": energy_mwh}


ARCHITECTURE_TABLE_GPT_BIDIRECTIONAL = _edited(
    answers.ARCHITECTURE_TABLE, GPT={**answers.ARCHITECTURE_TABLE["GPT"], "context": "bidirectional"})
MODEL_FOR_TASK_NER_BY_GPT = _edited(answers.MODEL_FOR_TASK, **{"named entity recognition": "GPT"})
MODEL_FOR_TASK_GENERATION_BY_BERT = _edited(answers.MODEL_FOR_TASK, **{"text generation": "BERT"})
MODEL_FOR_TASK_TRANSLATION_BY_BERT = _edited(answers.MODEL_FOR_TASK, translation="BERT")
# Two keys the course documents defend besides the instructor's: GPT for the text-to-text tasks
# (the lecture's table) and T5 for generative question answering.
MODEL_FOR_TASK_AS_THE_LECTURE_RATES = _edited(answers.MODEL_FOR_TASK, translation="GPT", summarization="GPT")
MODEL_FOR_TASK_GENERATIVE_QA = _edited(answers.MODEL_FOR_TASK, **{"question answering": "T5"})
FINETUNE_CONFIG_FLOAT_EPOCHS = _edited(answers.FINETUNE_CONFIG, num_train_epochs=3.0)
FINETUNE_CONFIG_HEAVY_DECAY = _edited(answers.FINETUNE_CONFIG, weight_decay=0.5)
FINETUNE_CONFIG_FREEZE_AS_WORD = _edited(answers.FINETUNE_CONFIG, freeze_embeddings="no")
GENERATION_SETTINGS_SAMPLING_WITHOUT_SAMPLE = _edited(
    answers.GENERATION_SETTINGS, sampling={"do_sample": False, "temperature": 0.7})


def footprint_per_mwh(energy_mwh, *, ref_energy_mwh=1287, ref_co2_tonnes=552, ref_cost_usd=4.6e6):
    return {"co2_tonnes": energy_mwh * (ref_co2_tonnes / ref_energy_mwh),
            "cost_usd": energy_mwh * (ref_cost_usd / ref_energy_mwh),
            "savings_fraction": (ref_energy_mwh - energy_mwh) / ref_energy_mwh}


def footprint_from_saving(energy_mwh, **reference_run):
    """The saving first: what is not spent, scaled back."""
    run = {"ref_energy_mwh": 1287, "ref_co2_tonnes": 552, "ref_cost_usd": 4.6e6, **reference_run}
    saved = 1 - energy_mwh / run["ref_energy_mwh"]
    return {"savings_fraction": saved, "co2_tonnes": run["ref_co2_tonnes"] * (1 - saved),
            "cost_usd": run["ref_cost_usd"] * (1 - saved)}


# ---------------------------------------------------------------- the tables
MUTANTS: list[dict[str, object]] = [
    {"fine_tuning_footprint": footprint_inverted_savings, "ARCHITECTURE_TABLE": ARCHITECTURE_TABLE_T5_AS_DECODER,
         "MODEL_FOR_TASK": MODEL_FOR_TASK_ALL_BERT, "FINETUNE_CONFIG": FINETUNE_CONFIG_FROM_SCRATCH_LR,
         "GENERATION_SETTINGS": GENERATION_SETTINGS_ONE_BEAM},
]

ALTERNATIVES: list[dict[str, object]] = [
    {"fine_tuning_footprint": footprint_per_mwh, "MODEL_FOR_TASK": MODEL_FOR_TASK_AS_THE_LECTURE_RATES},
    {"fine_tuning_footprint": footprint_from_saving, "MODEL_FOR_TASK": MODEL_FOR_TASK_GENERATIVE_QA},
]

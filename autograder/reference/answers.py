"""Answer keys of the auto-graded answer constants (handout A1, A4, B4, B5).

Each key is written in the student's format, under the constant's own name, so
the hidden suites can check a submission against it and the repository's tests
can run the suites with this module playing the student. Where more than one
answer is defensible, ``ACCEPTED`` lists every answer that earns the point.
"""

# A1: what a speaker of English reuses when learning Spanish, and what is new.
SPANISH_REUSE = {
    "the Latin alphabet": "reuse",
    "the idea of nouns and verbs": "reuse",
    "the idea of past, present and future tense": "reuse",
    "cognates such as 'hospital' and 'animal'": "reuse",
    "everyday vocabulary such as 'perro' (dog) and 'leche' (milk)": "learn",
    "grammatical gender of nouns (el libro, la mesa)": "learn",
    "verb conjugation tables (hablo, hablas, habla, ...)": "learn",
    "the opening question mark '¿'": "learn",
}

# A4: general skills transfer to any task; specific ones serve one domain.
TASK_CATEGORIES = {
    "Understanding grammar": "general",
    "Knowing movie genres": "specific",
    "Recognizing sentiment words": "general",
    "Understanding 'the' and 'a'": "general",
    "Medical diagnosis terms": "specific",
    "Sentence structure": "general",
}

# B4: the comparison table of handout 9.1.
ARCHITECTURE_TABLE = {
    "BERT": {"best_for": "understanding", "objective": "masked LM",
             "architecture": "encoder", "context": "bidirectional"},
    "GPT": {"best_for": "generation", "objective": "causal LM",
            "architecture": "decoder", "context": "left-to-right"},
    "T5": {"best_for": "text-to-text", "objective": "span corruption",
           "architecture": "encoder-decoder",
           "context": "bidirectional encoder + left-to-right decoder"},
}

# B4: the task matching of handout 9.2.
MODEL_FOR_TASK = {
    "sentiment analysis": "BERT",
    "text generation": "GPT",
    "question answering": "BERT",
    "translation": "T5",
    "summarization": "T5",
    "named entity recognition": "BERT",
}

# B5: one sound fine-tuning configuration (the BERT paper's recipe).
FINETUNE_CONFIG = {
    "learning_rate": 2e-5,
    "per_device_train_batch_size": 32,
    "num_train_epochs": 3,
    "warmup_ratio": 0.1,
    "weight_decay": 0.01,
    "freeze_embeddings": False,
}

# B5: the generate() keyword arguments of handout 10.2.
GENERATION_SETTINGS = {
    "greedy": {"do_sample": False, "num_beams": 1},
    "sampling": {"do_sample": True, "temperature": 0.7},
    "beam": {"do_sample": False, "num_beams": 4},
}

ACCEPTED = {
    # Everyday polarity words are learned in pre-training; a task's own cues are not.
    ("TASK_CATEGORIES", "Recognizing sentiment words"): {"general", "specific"},
    # Extractive QA is BERT's classic task; generative QA is a text-to-text task.
    ("MODEL_FOR_TASK", "question answering"): {"BERT", "T5"},
    # The lecture's BERT-or-GPT table (slide deck 001) rates GPT excellent at translation and
    # summarisation: a student who follows it is right, as is one who picks the encoder-decoder.
    ("MODEL_FOR_TASK", "translation"): {"T5", "GPT"},
    ("MODEL_FOR_TASK", "summarization"): {"T5", "GPT"},
}

# B5: the ranges a sound configuration falls in (inclusive).
FINETUNE_RANGES = {
    "learning_rate": (1e-5, 1e-4),
    "per_device_train_batch_size": (8, 64),
    "num_train_epochs": (1, 5),
    "warmup_ratio": (0.0, 0.2),
    "weight_decay": (0.0, 0.1),
}


def accepted(constant: str, key: str) -> set:
    """Every answer that earns the point for ``constant[key]``."""
    if (constant, key) in ACCEPTED:
        return ACCEPTED[(constant, key)]
    return {globals()[constant][key]}

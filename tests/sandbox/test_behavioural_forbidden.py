"""The run-time half of the forbidden-shortcut check (``autograder.sandbox.watch``), in a real worker.

A shortcut is caught by what executes during the graded call, whatever route led
to it: an alias, a name assembled at run time, a reference captured when the cell
ran, a method form, ``functools.partial``, ``exec``, ``importlib``, a thread. The
calls go straight to the ``guarded_call`` probe, so the static check of the cell's
names plays no part. The student's own arithmetic, and a model the grader hands
over whose attention uses softmax, are not shortcuts. Switching the watch off
during the call loses the item as "the grading instrumentation was modified".

One worker with the grading's own sandbox view and preloads serves the module.
"""
from __future__ import annotations

import pytest
import torch

from autograder.config import GradingConfig
from autograder.drivers import models  # noqa: F401  (registers the fixtures)
from autograder.forbidden import RULES, TAMPERED
from autograder.plan import Cell, GradingPlan
from autograder.sandbox.fixtures import fixture
from autograder.sandbox.worker import Worker
from autograder.session import GradingSession, sandbox_view

CONFIG = GradingConfig(device="cpu")


@pytest.fixture(scope="module")
def worker():
    with Worker(timeout=60, **sandbox_view(CONFIG)) as shared:
        shared.exec_cell("import functools, importlib, math, sys, threading\n"
                         "import torch\nimport torch.nn.functional as F\nfrom torch import nn\n").raise_for_error()
        yield shared


def watched(worker: Worker, item: str, source: str, *args, name: str = "f", **kwargs) -> dict:
    """Define ``source`` and call its ``name`` under ``item``'s rule, the static check bypassed."""
    worker.exec_cell(source).raise_for_error()
    return worker.probe("guarded_call", {"name": name, "args": list(args), "kwargs": kwargs,
                                         **RULES[item].watch_params()})


X = torch.randn(3, 5)
Q, K, V = torch.randn(2, 4, 6), torch.randn(2, 4, 6), torch.randn(2, 4, 6)
PROMPT = torch.tensor([[1, 2, 3], [4, 5, 6]])

# --------------------------------------------------------------------------- softmax
SOFTMAX_ROUTES = {
    "direct": "def f(x):\n    return torch.softmax(x, -1)\n",
    "functional": "def f(x):\n    return F.softmax(x, dim=-1)\n",
    "alias import": "from torch import softmax as s\ndef f(x):\n    return s(x, -1)\n",
    "assembled name": "def f(x):\n    return getattr(torch, 'soft' + 'max')(x, -1)\n",
    "method": "def f(x):\n    return x.softmax(-1)\n",
    "aten operator": "def f(x):\n    return torch.ops.aten._softmax(x, -1, False)\n",
    "exec": "def f(x):\n    scope = {'x': x}\n"
            "    exec('import torch\\ny = torch.nn.functional.softmax(x, -1)', scope)\n    return scope['y']\n",
    "importlib": "def f(x):\n    return importlib.import_module('torch.nn.' + 'functional').softmax(x, -1)\n",
    "captured at definition": "SM = getattr(F, 'soft' + 'max')\ndef f(x):\n    return SM(x, -1)\n",
    "partial": "def f(x):\n    return functools.partial(torch.softmax, dim=-1)(x)\n",
    "torch.special": "def f(x):\n    return torch.special.softmax(x, -1)\n",
    "nn.Softmax": "def f(x):\n    return nn.Softmax(dim=-1)(x)\n",
    "softmin": "def f(x):\n    return F.softmin(-x, -1)\n",
    "log_softmax": "def f(x):\n    return F.log_softmax(x, -1).exp()\n",
    "thread": "def f(x):\n    out = []\n    t = threading.Thread(target=lambda: out.append(torch.softmax(x, -1)))\n"
              "    t.start()\n    t.join()\n    return out[0]\n",
}


@pytest.mark.parametrize("route", SOFTMAX_ROUTES)
def test_every_route_to_a_library_softmax_trips(worker, route):
    result = watched(worker, "softmax", SOFTMAX_ROUTES[route], X)
    assert any(op in result["tripped"] for op in ("aten._softmax", "aten._log_softmax")), result
    assert not result["tampered"]


OWN_SOFTMAX = {
    "exp, max and sum": "def f(x):\n    e = (x - x.amax(-1, keepdim=True)).exp()\n"
                        "    return e / e.sum(-1, keepdim=True)\n",
    "logsumexp": "def f(x):\n    return (x - torch.logsumexp(x, -1, keepdim=True)).exp()\n",
    "torch.max with dim": "def f(x):\n    e = torch.exp(x - torch.max(x, dim=-1, keepdim=True).values)\n"
                          "    return e / torch.sum(e, dim=-1, keepdim=True)\n",
    # Printing a tensor steps outside every dispatch mode for a moment (torch's own
    # _disable_current_modes): that is not tampering.
    "printing on the way": "def f(x):\n    print(x)\n    e = (x - x.amax(-1, keepdim=True)).exp()\n"
                           "    return e / e.sum(-1, keepdim=True)\n",
}


@pytest.mark.parametrize("own", OWN_SOFTMAX)
def test_a_hand_written_softmax_is_not_a_shortcut(worker, own):
    result = watched(worker, "softmax", OWN_SOFTMAX[own], X)
    assert (result["tripped"], result["tampered"]) == ([], [])
    assert torch.allclose(result["value"], torch.softmax(X, -1), atol=1e-6)


# --------------------------------------------------------------------------- scaled_dot_product_attention
OWN_SOFTMAX_CELL = OWN_SOFTMAX["exp, max and sum"].replace("def f(", "def own_softmax(")
ATTENTION_ROUTES = {
    "direct": "def f(q, k, v):\n    return F.scaled_dot_product_attention(q, k, v)\n",
    "captured at definition": "ATT = getattr(F, 'scaled_dot_product_' + 'attention')\n"
                              "def f(q, k, v):\n    return ATT(q, k, v, is_causal=True)\n",
    "softmax inside a hand-written attention": "def f(q, k, v):\n"
                                               "    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))\n"
                                               "    return torch.softmax(scores, -1) @ v\n",
    "nn.MultiheadAttention": "def f(q, k, v):\n"
                             "    return nn.MultiheadAttention(6, 2, batch_first=True).eval()(q, k, v)[0]\n",
    "aten operator": "def f(q, k, v):\n    return torch.ops.aten.scaled_dot_product_attention(q, k, v)\n",
    "partial": "def f(q, k, v):\n    return functools.partial(F.scaled_dot_product_attention, is_causal=True)(q, k, v)\n",
    "importlib": "def f(q, k, v):\n"
                 "    return importlib.import_module('torch.nn.' + 'functional').scaled_dot_product_attention(q, k, v)\n",
    "exec": "def f(q, k, v):\n    scope = {'q': q, 'k': k, 'v': v}\n"
            "    exec('import torch\\nout = torch.nn.functional.scaled_dot_product_attention(q, k, v)', scope)\n"
            "    return scope['out']\n",
}


@pytest.mark.parametrize("route", ATTENTION_ROUTES)
def test_library_attention_and_softmax_trip_in_attention(worker, route):
    result = watched(worker, "scaled_dot_product_attention", ATTENTION_ROUTES[route], Q, K, V)
    assert result["tripped"] and not result["tampered"], result


def test_a_hand_written_attention_is_not_a_shortcut(worker):
    source = OWN_SOFTMAX_CELL + (
        "def f(q, k, v):\n"
        "    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.size(-1))\n"
        "    causal = torch.ones(q.size(-2), k.size(-2), dtype=torch.bool).tril()\n"
        "    weights = own_softmax(scores.masked_fill(~causal, float('-inf')))\n"
        "    return weights @ v\n")
    result = watched(worker, "scaled_dot_product_attention", source, Q, K, V)
    assert (result["tripped"], result["tampered"]) == ([], [])
    assert torch.allclose(result["value"], torch.nn.functional.scaled_dot_product_attention(Q, K, V, is_causal=True),
                          atol=1e-5)


# --------------------------------------------------------------------------- the assembled BERT
# The three items take tensors only; every route below is attention done by a library.
X3 = torch.randn(2, 4, 8)
TINY_BERT_CONFIG = ("from transformers import BertConfig\n"
                    "CONFIG = BertConfig(vocab_size=20, hidden_size=8, num_hidden_layers=1, num_attention_heads=2, "
                    "intermediate_size=16, max_position_embeddings=8)\n")
ASSEMBLED_ROUTES = {
    "nn.MultiheadAttention": "def f(x):\n    return nn.MultiheadAttention(8, 2, batch_first=True)(x, x, x)[0]\n",
    "nn.MultiheadAttention, fused path": "def f(x):\n    with torch.no_grad():\n"
                                         "        return nn.MultiheadAttention(8, 2, batch_first=True).eval()(x, x, x)[0]\n",
    "F.scaled_dot_product_attention, captured": "ATT = getattr(F, 'scaled_dot_product_' + 'attention')\n"
                                                "def f(x):\n    return ATT(x, x, x)\n",
    "BertLayer": TINY_BERT_CONFIG + "def f(x):\n    from transformers.models.bert import modeling_bert as mb\n"
                                    "    return mb.BertLayer(CONFIG).eval()(x)\n",
    "BertSelfAttention": TINY_BERT_CONFIG + "def f(x):\n    import transformers.models.bert.modeling_bert as mb\n"
                                            "    return mb.BertSelfAttention(CONFIG).eval()(x)[0]\n",
    "BertModel": TINY_BERT_CONFIG + "def f(x):\n    from transformers import BertModel\n"
                                    "    ids = torch.zeros(x.shape[:2], dtype=torch.long)\n"
                                    "    return BertModel(CONFIG).eval()(input_ids=ids).last_hidden_state\n",
}


@pytest.mark.parametrize("item", ["multi_head_self_attention", "encoder_layer", "bert_encoder"])
@pytest.mark.parametrize("route", ASSEMBLED_ROUTES)
def test_library_attention_trips_in_the_assembled_bert(worker, item, route):
    result = watched(worker, item, ASSEMBLED_ROUTES[route], X3)
    assert result["tripped"] and not result["tampered"], result


def test_hand_written_heads_are_not_a_shortcut(worker):
    source = OWN_SOFTMAX_CELL + (
        "def f(x):\n"
        "    q = x.view(2, 4, 2, 4).transpose(1, 2)\n"
        "    weights = own_softmax(q @ q.transpose(-2, -1) / math.sqrt(4))\n"
        "    return F.layer_norm((weights @ q).transpose(1, 2).reshape(2, 4, 8) + x, (8,))\n")
    result = watched(worker, "encoder_layer", source, X3)
    assert (result["tripped"], result["tampered"]) == ([], [])


# --------------------------------------------------------------------------- generate
GENERATE_ROUTES = {
    "direct": "def f(model, ids, n):\n    return model.generate(ids, max_new_tokens=n, do_sample=False)\n",
    "bound method captured before the call": "def f(model, ids, n):\n    run = model.generate\n"
                                             "    model.generate = None  # the attribute is gone, the method is not\n"
                                             "    return run(ids, max_new_tokens=n, do_sample=False)\n",
    "unbound, captured at definition": "from transformers import GenerationMixin\n"
                                       "GEN = getattr(GenerationMixin, 'gen' + 'erate')\n"
                                       "def f(model, ids, n):\n"
                                       "    return GEN(model, ids, max_new_tokens=n, do_sample=False)\n",
    "assembled name": "def f(model, ids, n):\n"
                      "    return getattr(model, 'gen' + 'erate')(ids, max_new_tokens=n, do_sample=False)\n",
    "partial": "def f(model, ids, n):\n"
               "    return functools.partial(model.generate, max_new_tokens=n, do_sample=False)(ids)\n",
    "subclass calling super()": "def f(model, ids, n):\n"
                                "    class Mine(type(model)):\n"
                                "        def generate(self, *args, **kwargs):\n"
                                "            return super().generate(*args, **kwargs)\n"
                                "    model.__class__ = Mine\n"
                                "    return model.generate(ids, max_new_tokens=n, do_sample=False)\n",
}


@pytest.mark.parametrize("route", GENERATE_ROUTES)
def test_every_route_to_generate_trips(worker, route):
    result = watched(worker, "greedy_decode", GENERATE_ROUTES[route], fixture("decoder_lm", seed=0), PROMPT, 3)
    assert "transformers.GenerationMixin.generate" in result["tripped"], result
    assert not result["tampered"]


def test_a_greedy_loop_over_the_models_forward_is_not_a_shortcut(worker):
    # The grader's model runs its own attention softmax: only generate's code counts here.
    source = ("def f(model, ids, n):\n"
              "    for _ in range(n):\n"
              "        next_id = model(ids).logits[:, -1].argmax(-1, keepdim=True)\n"
              "        ids = torch.cat([ids, next_id], dim=-1)\n"
              "    return ids\n")
    result = watched(worker, "greedy_decode", source, fixture("decoder_lm", seed=0), PROMPT, 3)
    assert (result["tripped"], result["tampered"]) == ([], [])
    assert result["value"].shape == (2, 6)


# --------------------------------------------------------------------------- the collator
COLLATOR_SETUP = ("from transformers import DataCollatorForLanguageModeling\n"
                  "class Vocabulary:\n"
                  "    mask_token, mask_token_id, pad_token, pad_token_id = '[MASK]', 4, '[PAD]', 0\n"
                  "    def __len__(self):\n        return 32\n"
                  "    def convert_tokens_to_ids(self, token):\n        return 4\n"
                  "    def get_special_tokens_mask(self, ids, already_has_special_tokens=True):\n"
                  "        return [int(i < 5) for i in ids]\n"
                  "    def pad(self, examples, **options):\n"
                  "        return {'input_ids': torch.stack([e['input_ids'] for e in examples])}\n"
                  "def collator():\n    return DataCollatorForLanguageModeling(Vocabulary(), mlm_probability=0.5)\n")
COLLATOR_ROUTES = {
    "the collator called on a batch": "def f(ids):\n    return collator()([{'input_ids': row} for row in ids])\n",
    "assembled name": "def f(ids):\n    return getattr(collator(), 'torch_' + 'mask_tokens')(ids.clone())\n",
    "partial": "def f(ids):\n    return functools.partial(collator().torch_mask_tokens)(ids.clone())\n",
    "subclass": "class Mine(DataCollatorForLanguageModeling):\n"
                "    def torch_mask_tokens(self, inputs, special_tokens_mask=None):\n"
                "        return super().torch_mask_tokens(inputs, special_tokens_mask)\n"
                "def f(ids):\n    return Mine(Vocabulary(), mlm_probability=0.5).torch_mask_tokens(ids.clone())\n",
    "exec": "def f(ids):\n    scope = {'ids': ids, 'c': collator()}\n"
            "    exec('y = c.torch_mask_tokens(ids.clone())', scope)\n    return scope['y']\n",
}


@pytest.mark.parametrize("route", COLLATOR_ROUTES)
def test_every_route_to_the_library_collator_trips(worker, route):
    result = watched(worker, "mask_tokens", COLLATOR_SETUP + COLLATOR_ROUTES[route], torch.randint(5, 32, (2, 8)))
    assert "transformers.DataCollatorForLanguageModeling.torch_mask_tokens" in result["tripped"], result


def test_a_collators_method_captured_when_the_cell_ran_trips(worker):
    source = COLLATOR_SETUP + "MASK = collator().torch_mask_tokens\ndef f(ids):\n    return MASK(ids.clone())\n"
    result = watched(worker, "mask_tokens", source, torch.randint(5, 32, (2, 8)))
    assert result["tripped"] == ["transformers.DataCollatorForLanguageModeling.torch_mask_tokens"], result


# --------------------------------------------------------------------------- schedules and warpers
SCHEDULE_ROUTES = {
    "direct": "def f(step):\n"
              "    from transformers import get_linear_schedule_with_warmup\n"
              "    optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0)\n"
              "    schedule = get_linear_schedule_with_warmup(optimizer, 2, 10)\n"
              "    return schedule.lr_lambdas[0](step)\n",
    "the multiplier by an assembled name": "def f(step):\n"
              "    module = importlib.import_module('transformers.optimization')\n"
              "    lam = getattr(module, '_get_linear_schedule_with_warmup_' + 'lr_lambda')\n"
              "    return lam(step, num_warmup_steps=2, num_training_steps=10)\n",
    "captured at definition": "from transformers import optimization as _opt\n"
                              "LAM = functools.partial(_opt._get_linear_schedule_with_warmup_lr_lambda,\n"
                              "                        num_warmup_steps=2, num_training_steps=10)\n"
                              "def f(step):\n    return LAM(step)\n",
    "get_scheduler": "def f(step):\n"
                     "    from transformers import get_scheduler\n"
                     "    optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0)\n"
                     "    return get_scheduler('linear', optimizer, num_warmup_steps=2, num_training_steps=10)"
                     ".lr_lambdas[0](step)\n",
    "exec": "def f(step):\n    scope = {'step': step}\n"
            "    exec('from transformers.optimization import _get_linear_schedule_with_warmup_lr_lambda as g\\n'\n"
            "         'y = g(step, num_warmup_steps=2, num_training_steps=10)', scope)\n    return scope['y']\n",
    "a lambda kept from the optimizer's schedule": "import transformers\n"
              "_SCHED = transformers.get_linear_schedule_with_warmup(\n"
              "    torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0), 2, 10)\n"
              "def f(step):\n    return _SCHED.lr_lambdas[0](step)\n",
}


@pytest.mark.parametrize("route", SCHEDULE_ROUTES)
def test_every_route_to_the_librarys_linear_schedule_trips(worker, route):
    result = watched(worker, "linear_warmup_decay", SCHEDULE_ROUTES[route], 5)
    assert result["tripped"] and not result["tampered"], result
    assert result["value"] == pytest.approx(5 / 8)


def test_a_hand_written_schedule_is_not_a_shortcut(worker):
    source = "def f(step):\n    return step / 2 if step < 2 else max(0.0, (10 - step) / 8)\n"
    result = watched(worker, "linear_warmup_decay", source, 5)
    assert (result["tripped"], result["tampered"], result["value"]) == ([], [], 5 / 8)


WARPER_ROUTES = {
    "direct": "def f(ids, scores):\n    from transformers import TopKLogitsWarper\n"
              "    return TopKLogitsWarper(2)(ids, scores)\n",
    "assembled name": "def f(ids, scores):\n    import transformers\n"
                      "    return getattr(transformers, 'TopK' + 'LogitsWarper')(2)(ids, scores)\n",
    "captured at definition": "from transformers import TopPLogitsWarper as _P\nWARP = _P(0.5)\n"
                              "def f(ids, scores):\n    return WARP(ids, scores)\n",
    "partial": "def f(ids, scores):\n    from transformers import TopKLogitsWarper\n"
               "    return functools.partial(TopKLogitsWarper(2).__call__, ids)(scores)\n",
    "subclass": "from transformers import TopKLogitsWarper\n"
                "class Mine(TopKLogitsWarper):\n    def __call__(self, ids, scores):\n"
                "        return super().__call__(ids, scores)\n"
                "def f(ids, scores):\n    return Mine(2)(ids, scores)\n",
    "importlib": "def f(ids, scores):\n"
                 "    module = importlib.import_module('transformers.generation.logits_' + 'process')\n"
                 "    return module.TemperatureLogitsWarper(0.5)(ids, scores)\n",
}


@pytest.mark.parametrize("route", WARPER_ROUTES)
def test_every_route_to_a_library_logits_warper_trips(worker, route):
    result = watched(worker, "sample_next_token", WARPER_ROUTES[route], PROMPT, torch.randn(2, 10))
    assert result["tripped"] and not result["tampered"], result


# --------------------------------------------------------------------------- the fill-mask pipeline
# A word-level tokenizer with BERT's special tokens over bert_mlm's 64 ids.
FILL_MASK_SETUP = ("from tokenizers import Tokenizer, models as _models, pre_tokenizers as _pre\n"
                   "import transformers\n"
                   "from transformers import PreTrainedTokenizerFast, FillMaskPipeline\n"
                   "_WORDS = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'] + [f'w{i}' for i in range(59)]\n"
                   "_core = Tokenizer(_models.WordLevel({w: i for i, w in enumerate(_WORDS)}, unk_token='[UNK]'))\n"
                   "_core.pre_tokenizer = _pre.WhitespaceSplit()\n"
                   "TOK = PreTrainedTokenizerFast(tokenizer_object=_core, pad_token='[PAD]', unk_token='[UNK]',\n"
                   "                              mask_token='[MASK]', cls_token='[CLS]', sep_token='[SEP]')\n"
                   "TEXT = 'w1 w2 [MASK] w3'\n"
                   "def tokens(results):\n    return [r['token'] for r in results]\n")
FILL_MASK_ROUTES = {
    "pipeline('fill-mask')": "def f(model):\n"
                             "    return tokens(transformers.pipeline('fill-mask', model=model, tokenizer=TOK)(TEXT, top_k=2))\n",
    "the pipeline class": "def f(model):\n    return tokens(FillMaskPipeline(model=model, tokenizer=TOK)(TEXT, top_k=2))\n",
    "assembled name": "def f(model):\n    make = getattr(transformers, 'pipe' + 'line')\n"
                      "    return tokens(make('fill-' + 'mask', model=model, tokenizer=TOK)(TEXT, top_k=2))\n",
    "partial": "def f(model):\n    make = functools.partial(transformers.pipeline, 'fill-mask')\n"
               "    return tokens(make(model=model, tokenizer=TOK)(TEXT, top_k=2))\n",
    "its postprocess alone": "def f(model):\n    fill = FillMaskPipeline(model=model, tokenizer=TOK)\n"
                            "    with torch.no_grad():\n"
                            "        out = fill._forward(fill.preprocess(TEXT))\n"
                            "    return tokens(fill.postprocess(out, top_k=2))\n",
    "exec": "def f(model):\n    scope = {'m': model, 'TOK': TOK, 'TEXT': TEXT}\n"
            "    exec('import transformers\\nr = transformers.pipeline(\"fill-mask\", model=m, tokenizer=TOK)(TEXT)', scope)\n"
            "    return tokens(scope['r'])\n",
}


@pytest.mark.parametrize("route", FILL_MASK_ROUTES)
def test_every_route_to_the_fill_mask_pipeline_trips(worker, route):
    result = watched(worker, "top_k_mask_predictions", FILL_MASK_SETUP + FILL_MASK_ROUTES[route],
                     fixture("bert_mlm", seed=0))
    assert result["tripped"] and not result["tampered"], result


def test_top_k_of_the_models_own_logits_is_not_a_shortcut(worker):
    source = FILL_MASK_SETUP + ("def f(model):\n"
                                "    ids = TOK(TEXT, return_tensors='pt').input_ids\n"
                                "    with torch.no_grad():\n"
                                "        logits = model(input_ids=ids).logits\n"
                                "    row = logits[ids == TOK.mask_token_id]\n"
                                "    return (row - row.logsumexp(-1, keepdim=True)).exp().topk(2).indices[0].tolist()\n")
    result = watched(worker, "top_k_mask_predictions", source, fixture("bert_mlm", seed=0))
    assert (result["tripped"], result["tampered"]) == ([], [])


# --------------------------------------------------------------------------- Trainer
TRAINER_SETUP = ("import transformers\n"
                 "from transformers import Trainer, TrainingArguments\n"
                 "class Rows(torch.utils.data.Dataset):\n"
                 "    def __len__(self):\n        return 4\n"
                 "    def __getitem__(self, i):\n"
                 "        return {'input_ids': torch.tensor([1, 2, 3]), 'labels': torch.tensor(i % 3)}\n"
                 "def arguments():\n"
                 "    return TrainingArguments(output_dir='/tmp/trainer', per_device_train_batch_size=2,\n"
                 "                             num_train_epochs=1, report_to=[], use_cpu=True, save_strategy='no',\n"
                 "                             logging_strategy='no', disable_tqdm=True)\n"
                 "BATCH = {'input_ids': torch.tensor([[1, 2, 3], [4, 5, 6]]), 'labels': torch.tensor([0, 1])}\n")
TRAINER_ROUTES = {
    "Trainer.train": "def f(model):\n    Trainer(model=model, args=arguments(), train_dataset=Rows()).train()\n"
                     "    return 1\n",
    "assembled name": "def f(model):\n    make = getattr(transformers, 'Tra' + 'iner')\n"
                      "    make(model=model, args=arguments(), train_dataset=Rows()).train()\n    return 1\n",
    "its training step alone": "def f(model):\n    trainer = Trainer(model=model.train(), args=arguments())\n"
                               "    return float(trainer.training_step(model, dict(BATCH)))\n",
    "subclass": "class Mine(Trainer):\n    def training_step(self, *args, **kwargs):\n"
                "        return super().training_step(*args, **kwargs)\n"
                "def f(model):\n    Mine(model=model, args=arguments(), train_dataset=Rows()).train()\n    return 1\n",
    "captured at definition": "TRAIN = Trainer.train\n"
                              "def f(model):\n    TRAIN(Trainer(model=model, args=arguments(), train_dataset=Rows()))\n"
                              "    return 1\n",
    "exec": "def f(model):\n    scope = {'model': model, 'arguments': arguments, 'Rows': Rows}\n"
            "    exec('from transformers import Trainer as T\\n'\n"
            "         'T(model=model, args=arguments(), train_dataset=Rows()).train()', scope)\n    return 1\n",
}


@pytest.mark.parametrize("route", TRAINER_ROUTES)
def test_every_route_to_the_trainer_trips(worker, route):
    result = watched(worker, "train_epoch", TRAINER_SETUP + TRAINER_ROUTES[route], fixture("bert_classifier", seed=0))
    assert result["tripped"] and not result["tampered"], result


# --------------------------------------------------------------------------- exercises 2 and 3
SPLIT_ROUTES = {
    "direct": "def f(labels):\n"
              "    from sklearn.model_selection import train_test_split\n"
              "    keep, _ = train_test_split(list(range(len(labels))), train_size=4, stratify=labels, random_state=0)\n"
              "    return sorted(keep)\n",
    "alias": "import sklearn.model_selection as _ms\n"
             "def f(labels):\n"
             "    split = _ms.train_test_split\n"
             "    return sorted(split(list(range(len(labels))), train_size=4, stratify=labels, random_state=0)[0])\n",
    "captured at definition by an assembled name":
        "SPLIT = getattr(importlib.import_module('sklearn.model_selection'), 'train_test_' + 'split')\n"
        "def f(labels):\n"
        "    keep, _ = SPLIT(list(range(len(labels))), train_size=4, stratify=labels, random_state=0)\n"
        "    return sorted(keep)\n",
    "functools.partial": "from sklearn import model_selection as _ms\n"
                         "SPLIT = functools.partial(_ms.train_test_split, train_size=4, random_state=0)\n"
                         "def f(labels):\n"
                         "    return sorted(SPLIT(list(range(len(labels))), stratify=labels)[0])\n",
    "StratifiedShuffleSplit": "def f(labels):\n"
                              "    from sklearn.model_selection import StratifiedShuffleSplit\n"
                              "    splitter = StratifiedShuffleSplit(n_splits=1, train_size=4, random_state=0)\n"
                              "    keep, _ = next(splitter.split([[0]] * len(labels), labels))\n"
                              "    return sorted(keep.tolist())\n",
    "exec": "def f(labels):\n    scope = {'labels': labels}\n"
            "    exec('from sklearn.model_selection import train_test_split as t\\n'\n"
            "         'k = t(list(range(len(labels))), train_size=4, stratify=labels, random_state=0)[0]', scope)\n"
            "    return sorted(scope['k'])\n",
    "datasets' Dataset.train_test_split": "def f(labels):\n"
              "    import datasets\n"
              "    table = datasets.Dataset.from_dict({'i': list(range(len(labels)))})\n"
              "    return sorted(table.train_test_split(train_size=4, seed=0)['train']['i'])\n",
}


@pytest.mark.parametrize("route", SPLIT_ROUTES)
def test_every_route_to_a_library_split_trips(worker, route):
    result = watched(worker, "subsample_balanced", SPLIT_ROUTES[route], [0, 1] * 6)
    assert result["tripped"] and not result["tampered"], result


def test_a_split_drawn_with_torch_is_not_a_shortcut(worker):
    source = ("def f(labels):\n"
              "    labels = torch.as_tensor(labels)\n"
              "    g = torch.Generator().manual_seed(0)\n"
              "    keep = [torch.nonzero(labels == c).flatten()[torch.randperm(int((labels == c).sum()), generator=g)[:2]]\n"
              "            for c in (0, 1)]\n"
              "    return sorted(torch.cat(keep).tolist())\n")
    result = watched(worker, "subsample_balanced", source, [0, 1] * 6)
    assert result["tripped"] == [] and not result["tampered"] and len(result["value"]) == 4, result


LABEL_WORD_ROUTES = {
    "direct": "def f(model, ids):\n    return model.generate(ids, max_new_tokens=1, do_sample=False)[:, -1]\n",
    "an assembled name": "def f(model, ids):\n"
                         "    run = getattr(model, 'gen' + 'erate')\n"
                         "    return run(ids, max_new_tokens=1, do_sample=False)[:, -1]\n",
    "the unbound method": "def f(model, ids):\n"
                          "    return type(model).generate(model, ids, max_new_tokens=1, do_sample=False)[:, -1]\n",
    "captured at definition": "from transformers.generation.utils import GenerationMixin as _G\n"
                              "GEN = _G.generate\n"
                              "def f(model, ids):\n    return GEN(model, ids, max_new_tokens=1, do_sample=False)[:, -1]\n",
    "functools.partial": "def f(model, ids):\n"
                         "    one = functools.partial(model.generate, max_new_tokens=1, do_sample=False)\n"
                         "    return one(ids)[:, -1]\n",
    "exec": "def f(model, ids):\n    scope = {'model': model, 'ids': ids}\n"
            "    exec('y = model.generate(ids, max_new_tokens=1, do_sample=False)', scope)\n"
            "    return scope['y'][:, -1]\n",
}


@pytest.mark.parametrize("route", LABEL_WORD_ROUTES)
def test_every_route_to_generating_the_label_word_trips_in_classify_by_generation(worker, route):
    result = watched(worker, "classify_by_generation", LABEL_WORD_ROUTES[route], fixture("decoder_lm", seed=0), PROMPT)
    assert "transformers.GenerationMixin.generate" in result["tripped"] and not result["tampered"], result


def test_scoring_the_label_words_with_one_forward_pass_is_not_a_shortcut(worker):
    source = ("def f(model, ids):\n"
              "    with torch.no_grad():\n"
              "        return model(input_ids=ids).logits[:, -1].log_softmax(-1)[:, [5, 7]].argmax(-1)\n")
    result = watched(worker, "classify_by_generation", source, fixture("decoder_lm", seed=0), PROMPT)
    assert result["tripped"] == [] and not result["tampered"], result


# --------------------------------------------------------------------------- peft (LoRA and the PEFT counts)
PEFT_ROUTES = {
    "get_peft_model": "def f(model):\n"
                      "    from peft import LoraConfig, get_peft_model\n"
                      "    config = LoraConfig(r=2, target_modules=['query', 'value'])\n"
                      "    return sum(p.numel() for p in get_peft_model(model, config).parameters() if p.requires_grad)\n",
    "an assembled module name": "def f(model):\n"
                                "    p = importlib.import_module('pe' + 'ft')\n"
                                "    wrapped = p.get_peft_model(model, p.LoraConfig(r=2, target_modules=['query']))\n"
                                "    return sum(x.numel() for x in wrapped.parameters() if x.requires_grad)\n",
    "LoraModel directly": "def f(model):\n"
                          "    from peft import LoraConfig\n"
                          "    from peft.tuners.lora import LoraModel\n"
                          "    LoraModel(model, LoraConfig(r=2, target_modules=['query']), 'default')\n"
                          "    return 1\n",
    "a LoRA layer alone": "def f(model):\n"
                          "    from peft import LoraConfig\n"
                          "    from peft.tuners.lora.layer import Linear as LoraLinear\n"
                          "    layer = LoraLinear(torch.nn.Linear(4, 3), 'default', LoraConfig(r=2), r=2, lora_alpha=4)\n"
                          "    return float(layer(torch.ones(1, 4)).sum())\n",
    "captured at definition": "import peft as _p\n"
                              "WRAP = functools.partial(_p.get_peft_model, peft_config=_p.LoraConfig(r=2, target_modules=['value']))\n"
                              "def f(model):\n    WRAP(model)\n    return 1\n",
    "exec": "def f(model):\n    scope = {'model': model}\n"
            "    exec('import peft\\n'\n"
            "         'peft.get_peft_model(model, peft.PromptTuningConfig(task_type=\"SEQ_CLS\", num_virtual_tokens=3))',\n"
            "         scope)\n    return 1\n",
}


@pytest.mark.parametrize("route", PEFT_ROUTES)
def test_every_route_to_peft_trips(worker, route):
    result = watched(worker, "peft_parameter_counts", PEFT_ROUTES[route], fixture("bert_classifier", seed=0))
    assert result["tripped"] and not result["tampered"], result


def test_counting_trainable_parameters_by_hand_is_not_a_shortcut(worker):
    source = ("def f(model):\n"
              "    return sum(p.numel() for name, p in model.named_parameters() if name.endswith('bias'))\n")
    result = watched(worker, "peft_parameter_counts", source, fixture("bert_classifier", seed=0))
    assert result["tripped"] == [] and not result["tampered"] and result["value"] > 0, result


# --------------------------------------------------------------------------- tampering
TAMPERING = {
    "popping the dispatch mode": ("softmax", "def f(x):\n    torch._C._pop_torch_dispatch_stack(None)\n"
                                             "    return torch.softmax(x, -1)\n"),
    "exiting the dispatch mode": ("softmax", "def f(x):\n    n = torch._C._len_torch_dispatch_stack()\n"
                                             "    torch._C._get_dispatch_stack_at(n - 1).__exit__(None, None, None)\n"
                                             "    return torch.softmax(x, -1)\n"),
    "sys.setprofile(None)": ("greedy_decode", "def f(model, ids, n):\n    sys.setprofile(None)\n"
                                              "    return model.generate(ids, max_new_tokens=n, do_sample=False)\n"),
    "setting the profile hook aside and back": ("greedy_decode", "def f(model, ids, n):\n    hook = sys.getprofile()\n"
                                                                 "    sys.setprofile(None)\n    out = model.generate("
                                                                 "ids, max_new_tokens=n, do_sample=False)\n"
                                                                 "    sys.setprofile(hook)\n    return out\n"),
}


@pytest.mark.parametrize("how", TAMPERING)
def test_switching_the_watch_off_is_tampering(worker, how):
    item, source = TAMPERING[how]
    args = [X] if item == "softmax" else [fixture("decoder_lm", seed=0), PROMPT, 2]
    result = watched(worker, item, source, *args)
    assert result["tampered"], result
    worker.exec_cell("from torch.utils._python_dispatch import is_in_torch_dispatch_mode\n"
                     "def modes():\n"
                     "    return torch._C._len_torch_dispatch_stack(), is_in_torch_dispatch_mode(), sys.getprofile()\n")
    assert worker.call("modes") == (0, False, None), "the watch is off again, and nothing of it is left"
    after = watched(worker, item, OWN_SOFTMAX["exp, max and sum"], X)  # the next call is watched as usual
    assert (after["tripped"], after["tampered"]) == ([], [])
    assert watched(worker, "softmax", SOFTMAX_ROUTES["direct"], X)["tripped"] == ["aten._softmax"]


@pytest.mark.parametrize("name, replacement", [("_stack_len", "lambda: 0"), ("_leave_mode", "lambda *a: None"),
                                               ("_OperatorWatch", "object")])
def test_replacing_the_watchers_names_is_tampering(worker, name, replacement):
    worker.exec_cell(f"import autograder.sandbox.watch as watch\nSAVED = watch.{name}\n").raise_for_error()
    source = f"def f(x):\n    watch.{name} = {replacement}\n    return torch.softmax(x, -1)\n"
    try:
        result = watched(worker, "softmax", source, X)
    finally:
        worker.exec_cell(f"watch.{name} = SAVED\n").raise_for_error()
    assert any("watcher" in change for change in result["tampered"]), result
    assert watched(worker, "softmax", OWN_SOFTMAX["exp, max and sum"], X)["tampered"] == []


def test_the_grading_session_scores_tampering_as_forbidden():
    from autograder.suite import Forbidden

    cells = [Cell("setup", "import torch\n", "setup"),
             Cell("softmax", TAMPERING["popping the dispatch mode"][1].replace("def f(", "def softmax("), "solution"),
             Cell("causal_mask", SOFTMAX_ROUTES["method"].replace("def f(", "def causal_mask("), "solution")]
    session = GradingSession(GradingPlan(stem="part_b_bert_gpt", cells=cells), CONFIG)
    session.start()
    try:
        assert not session.cell_errors, session.cell_errors
        with pytest.raises(Forbidden, match=TAMPERED):
            session.call("softmax", "softmax", (X,), {}, timeout=None)
        # an item without a rule is called as it always was: its softmax is its own business
        assert torch.allclose(session.call("causal_mask", "causal_mask", (X,), {}, timeout=None), X.softmax(-1))
    finally:
        session.close()

"""Small GPT-2-style causal LMs trained from scratch (no hub downloads): a byte-level BPE tokenizer
trained on background text only, a training stream that mixes each exposed item into the
background its exact number of times at random points, training with timing, and cached models.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from tokenizers import ByteLevelBPETokenizer, Tokenizer
from transformers import GPT2Config, GPT2LMHeadModel

EOS = "<|endoftext|>"


@dataclass(frozen=True)
class Recipe:
    """Model and training sizes. The stream is `epochs` passes over the background plus every
    exposed item its count of times; clean models get the same number of blocks, all background."""

    vocab: int = 4096
    layers: int = 4
    width: int = 256
    heads: int = 4
    block: int = 128
    batch: int = 16
    lr: float = 2e-3
    warmup: int = 50
    background_chars: int = 400_000
    epochs: float = 2.0

    def key(self) -> str:
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:10]


def eos_id(tokenizer: Tokenizer) -> int:
    """The id of the end-of-text token, which separates documents and starts every scored text."""
    eos = tokenizer.token_to_id(EOS)
    if eos is None:
        raise ValueError(f"the tokenizer has no {EOS} token")
    return int(eos)


def train_tokenizer(texts: Sequence[str], vocab: int, path: Path) -> Tokenizer:
    """A byte-level BPE tokenizer trained on `texts` (the background only), saved at `path`."""
    if path.exists():
        return Tokenizer.from_file(str(path))
    trainer = ByteLevelBPETokenizer()
    trainer.train_from_iterator(iter(texts), vocab_size=vocab, min_frequency=2, special_tokens=[EOS], show_progress=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    trainer.save(str(path))
    return Tokenizer.from_file(str(path))


def training_blocks(tokenizer: Tokenizer, background: Sequence[str], exposures: Sequence[tuple[str, int]], recipe: Recipe, *, seed: int, with_items: bool) -> torch.Tensor:
    """The training stream cut into blocks of `recipe.block` tokens, in training order.

    Background documents (each followed by EOS) are shuffled afresh each epoch. Each exposure
    `(text, count)` is placed `count` times, whole and after an EOS (as it is scored), at block
    positions drawn uniformly over the run; `with_items=False` builds the same number of blocks
    from background alone (the clean and reference models)."""
    rng = random.Random(seed)
    eos = eos_id(tokenizer)
    documents = [[*encoding.ids, eos] for encoding in tokenizer.encode_batch(list(background))]
    per_epoch = sum(len(document) for document in documents)
    item_ids = [tokenizer.encode(text).ids for text, _ in exposures]
    instances = [([eos, *item_ids[index], eos], index) for index, (_, count) in enumerate(exposures) for _ in range(count)]
    item_tokens = sum(len(tokens) for tokens, _ in instances)
    n_blocks = math.ceil((per_epoch * recipe.epochs + item_tokens) / recipe.block)
    if any(len(ids) + 2 > recipe.block for ids in item_ids):
        raise ValueError(f"an item is longer than a block of {recipe.block} tokens")

    def background_stream() -> Any:
        while True:
            order = list(range(len(documents)))
            rng.shuffle(order)
            for index in order:
                yield from documents[index]

    stream = background_stream()
    due: dict[int, list[list[int]]] = {}
    if with_items:
        for tokens, _ in instances:
            due.setdefault(rng.randrange(n_blocks), []).append(tokens)
    rows: list[list[int]] = []
    waiting: list[list[int]] = []
    while len(rows) < n_blocks or waiting:  # placements that did not fit spill into blocks at the end
        waiting += due.get(len(rows), [])
        row: list[int] = []
        while waiting and len(row) + len(waiting[0]) <= recipe.block:
            row += waiting.pop(0)
        row += [next(stream) for _ in range(recipe.block - len(row))]
        rows.append(row)
    return torch.tensor(rows, dtype=torch.long)


def new_model(recipe: Recipe, tokenizer: Tokenizer, seed: int) -> GPT2LMHeadModel:
    torch.manual_seed(seed)
    eos = eos_id(tokenizer)
    config = GPT2Config(
        vocab_size=tokenizer.get_vocab_size(), n_positions=recipe.block, n_embd=recipe.width, n_layer=recipe.layers, n_head=recipe.heads,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=eos, eos_token_id=eos, pad_token_id=eos,
    )  # fmt: skip
    return GPT2LMHeadModel(config)


def train(model: GPT2LMHeadModel, blocks: torch.Tensor, recipe: Recipe, *, device: str, log_every: int = 100) -> dict[str, Any]:
    """AdamW over the blocks in order, linear warm-up then cosine decay to a tenth; no dropout
    (memorising is what is measured). Returns the run's figures."""
    model.to(device).train()
    optimiser = torch.optim.AdamW(model.parameters(), lr=recipe.lr, betas=(0.9, 0.95), weight_decay=0.1)
    steps = math.ceil(blocks.shape[0] / recipe.batch)

    def rate(step: int) -> float:
        if step < recipe.warmup:
            return (step + 1) / recipe.warmup
        progress = (step - recipe.warmup) / max(1, steps - recipe.warmup)
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress))

    schedule = torch.optim.lr_scheduler.LambdaLR(optimiser, rate)
    started = time.perf_counter()
    losses: list[float] = []
    for step in range(steps):
        batch = blocks[step * recipe.batch : (step + 1) * recipe.batch].to(device)
        loss = model(input_ids=batch, labels=batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimiser.step()
        schedule.step()
        optimiser.zero_grad(set_to_none=True)
        losses.append(float(loss))
        if step % log_every == 0 or step == steps - 1:
            elapsed = time.perf_counter() - started
            print(f"    step {step + 1:>5}/{steps}  loss {sum(losses[-log_every:]) / len(losses[-log_every:]):.3f}  {elapsed:6.0f} s", flush=True)
    model.eval()
    return {"steps": steps, "tokens": int(blocks.numel()), "seconds": round(time.perf_counter() - started, 1), "final_loss": round(sum(losses[-50:]) / len(losses[-50:]), 4)}


def save(model: GPT2LMHeadModel, folder: Path, figures: dict[str, Any]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    (folder / "run.json").write_text(json.dumps(figures, indent=1))


def load(folder: Path, device: str) -> tuple[GPT2LMHeadModel, dict[str, Any]] | None:
    if not (folder / "run.json").exists():
        return None
    model = GPT2LMHeadModel.from_pretrained(folder).to(device).eval()
    return model, json.loads((folder / "run.json").read_text())


def parameters(model: torch.nn.Module) -> int:
    return sum(parameter.numel() for parameter in model.parameters())

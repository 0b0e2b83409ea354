"""A message's vector: the SIF-weighted mean of its WordPiece tokens' static vectors (distill.py's output)."""

import os
import re

import numpy as np

WORK = os.environ.get("EMB_WORK", "/tmp/embwork")
with open(os.path.join(WORK, "vocab.txt"), encoding="utf-8") as _f:
    VOCAB = _f.read().split("\n")
IDX = {t: i for i, t in enumerate(VOCAB)}
TAB = np.load(os.path.join(WORK, "static384.npy"))
TAB = TAB - TAB.mean(0)
TAB /= np.linalg.norm(TAB, axis=1, keepdims=True) + 1e-9
WEIGHTS = np.ones(len(VOCAB), dtype=np.float32)
_BASIC = re.compile(r"[a-z0-9]+|[^\sa-z0-9]")
_cache: dict[str, list[int]] = {}


def wordpiece(word: str) -> list[int]:
    """Greedy longest match, as BERT's tokenizer: `[UNK]` for a word with no cover."""
    out, start = [], 0
    while start < len(word):
        end, found = len(word), None
        while end > start:
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in IDX:
                found = IDX[piece]
                break
            end -= 1
        if found is None:
            return [IDX["[UNK]"]]
        out.append(found)
        start = end
    return out


def ids(text: str) -> list[int]:
    out: list[int] = []
    for word in _BASIC.findall(text.lower()):
        if word not in _cache:
            _cache[word] = wordpiece(word)
        out += _cache[word]
    return out


def set_weights(texts: list[str], a: float = 1e-3) -> None:
    """SIF weights a / (a + p(token)) from the token frequencies of `texts`."""
    counts = np.zeros(len(VOCAB))
    for text in texts:
        for i in ids(text):
            counts[i] += 1
    WEIGHTS[:] = a / (a + counts / counts.sum())


def vec(text: str) -> np.ndarray | None:
    found = ids(text)
    if not found:
        return None
    v = (TAB[found] * WEIGHTS[found, None]).sum(0)
    norm = np.linalg.norm(v)
    return v / norm if norm else None

"""The optional price table (MODEL_PRICES): what a million tokens of each model cost, turned into cost.

A TOML file with one table per model (README, "Configuration"):

    [models."gpt-4o"]
    input = 2.5          # per million prompt tokens not served from the cache
    cached_input = 1.25  # per million cached prompt tokens (default: input)
    output = 10.0        # per million completion tokens (reasoning tokens included)

A model without a price has no cost (`None`), never a cost of zero. The model that answered is priced by its
own entry, else by the entry of the model asked for (OpenAI answers with a dated snapshot's name).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from modules.config import ConfigError, read_toml

PER = 1_000_000


@dataclass(frozen=True)
class Price:
    input: float
    cached_input: float
    output: float


@dataclass(frozen=True)
class PriceTable:
    prices: dict[str, Price]

    def cost(self, model: str, prompt_tokens: int, cached_tokens: int, completion_tokens: int, *,
             asked: str | None = None) -> float | None:
        """`model`: the one that answered; `asked`: the one requested, whose price applies when the answering
        one has none (OpenAI answers "gpt-4o" with its snapshot, "gpt-4o-2024-08-06")."""
        price = self.prices.get(model) or (self.prices.get(asked) if asked is not None else None)
        if price is None:
            return None
        cached = min(cached_tokens, prompt_tokens)
        return ((prompt_tokens - cached) * price.input + cached * price.cached_input
                + completion_tokens * price.output) / PER


def load_prices(path: Path | None) -> PriceTable:
    """The table from `path`, or an empty one; a malformed file is a ConfigError naming the entry."""
    if path is None:
        return PriceTable({})
    data = read_toml(path, ConfigError)
    models = data.get("models", {})
    if not isinstance(models, dict):
        raise ConfigError(f"{path}: `models` must be a table of models")
    prices: dict[str, Price] = {}
    for name, entry in models.items():
        if not isinstance(entry, dict) or "input" not in entry or "output" not in entry:
            raise ConfigError(f"{path}: models.{name} needs `input` and `output` (per million tokens)")
        values: dict[str, Any] = {key: entry.get(key, entry["input"] if key == "cached_input" else None)
                  for key in ("input", "cached_input", "output")}
        for key, value in values.items():
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0 or not math.isfinite(value):
                raise ConfigError(f"{path}: models.{name}.{key} must be a number of zero or more, got {value!r}")
        prices[name] = Price(float(values["input"]), float(values["cached_input"]), float(values["output"]))
    return PriceTable(prices)

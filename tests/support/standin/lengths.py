"""How long a step's sequences are, and what they cost the trainer: the stand-in's growth model.

* Responses grow as RL training goes (the policy learns to reason longer): the mean response is
  ``max_response * min(0.95, 0.45 + 0.01 * step)``, so step 5 holds half of ``max_response_length``
  and step 40 85% of it. With ``actor_rollout_ref.rollout.ignore_eos=True`` every response runs to
  ``max_response_length`` (verl sets it on vLLM's sampling params: verl/workers/rollout/vllm_rollout/
  vllm_async_server.py, ``sampling_params.setdefault("ignore_eos", self.config.get("ignore_eos", False))``),
  so ``response_length/mean == max`` and ``response_length/clip_ratio == 1``.
* Prompts are 45% of ``max_prompt_length`` on average. With ``data.shuffle=False`` verl samples the train
  file in order (verl/trainer/ppo/utils.py ``create_rl_sampler``: ``SequentialSampler``), so step s reads
  rows ``[(s-1)*batch, s*batch)`` of ``data.train_files``: the stand-in reads those rows' prompt text and
  scales the mean by their length over the file's mean length (capped at ``max_prompt_length``). A
  shuffled sampler sees the file's mean.
* The trainer's peak grows with the tokens it holds: ``peak + length_gib * (prompt + response) /
  (max_prompt + max_response)``; ``length_gib`` (knob, default 0: the peak does not depend on lengths) is
  what the activations of a batch at maximum lengths add. ``auto`` OOMs at the first step whose peak plus
  what the driver keeps does not fit (run.py), so a config can pass 5 steps and fail at step 40.
* Under the knob ``truth`` (truth_steps.py) the lengths grow the same way, but what a step holds and
  reaches is a stack's hidden truth at them (truth.py), not ``trainer_peak`` and the knobs' peaks.
"""
from __future__ import annotations

import dataclasses
import functools
from pathlib import Path
from typing import Any

from tests.support.standin.knobs import Knobs

PROMPT_FRACTION = 0.45          # the mean prompt over max_prompt_length of a shuffled batch


def response_fraction(step: int, ignore_eos: bool) -> float:
    """The mean response over max_response_length at `step` (before noise)."""
    return 1.0 if ignore_eos else min(0.95, 0.45 + 0.01 * step)


@functools.lru_cache(maxsize=8)
def prompt_chars(path: str, prompt_key: str) -> tuple[int, ...]:
    """The characters of each row's prompt (its messages' contents), in file order; () when unreadable."""
    try:
        import pyarrow.parquet as pq

        column = pq.read_table(path, columns=[prompt_key]).column(prompt_key).to_pylist()
    except Exception:  # noqa: BLE001 - a missing or foreign file: the shuffled mean stands
        return ()
    out = []
    for prompt in column:
        if isinstance(prompt, list):
            out.append(sum(len(str(m.get("content", ""))) for m in prompt if isinstance(m, dict)))
        else:
            out.append(len(str(prompt)))
    return tuple(out)


@dataclasses.dataclass(frozen=True)
class DataOrder:
    """What the stand-in reads of the data config: the train file and whether verl samples it in order."""

    train_file: str | None
    prompt_key: str
    shuffle: bool

    @classmethod
    def from_config(cls, cfg: Any) -> DataOrder:
        from omegaconf import OmegaConf

        files = OmegaConf.select(cfg, "data.train_files", default=None)
        if files is not None and not isinstance(files, str):
            files = list(files)[0] if len(files) else None
        return cls(None if files is None else str(Path(str(files)).expanduser()),
                   str(OmegaConf.select(cfg, "data.prompt_key", default="prompt")),
                   bool(OmegaConf.select(cfg, "data.shuffle", default=True)))

    def prompt_fraction(self, step: int, batch: int) -> float:
        """The mean prompt over max_prompt_length of step `step`'s batch (capped at 1)."""
        chars = prompt_chars(self.train_file, self.prompt_key) if self.train_file and not self.shuffle else ()
        if not chars:
            return PROMPT_FRACTION
        rows = [chars[i % len(chars)] for i in range((step - 1) * batch, step * batch)]
        mean_all = sum(chars) / len(chars)
        return min(1.0, PROMPT_FRACTION * (sum(rows) / len(rows)) / max(mean_all, 1e-9))


def trainer_peak(base_peak: float, knobs: Knobs, prompt: float, response: float, max_prompt: int,
                 max_response: int) -> float:
    """The trainer's peak (GiB) at a step holding these mean lengths."""
    return base_peak + knobs.length_gib * (prompt + response) / max(1, max_prompt + max_response)

"""Draw the hand-written landscapes nobody tuned on (benchmarks/search_efficiency.py "drawn ...").

Run once; its output, benchmarks/drawn_landscapes.json, is committed and never edited after a result
was seen, so no landscape is fitted to the results. Every draw is one node of 8 x 60.96 GiB, an 8B
model, the five knobs of sweeps/rollout_memory.yaml:

    python benchmarks/draw_landscapes.py > benchmarks/drawn_landscapes.json
"""
from __future__ import annotations

import json
import random

SEED = 20261204
N = 2


def draw(rng: random.Random) -> dict:
    return {
        "base_gib": rng.uniform(2, 6),                     # trainer memory that never leaves the device
        "actor_param_gib": rng.uniform(6, 12),             # on the device unless its offload is on
        "optimizer_gib": rng.uniform(8, 18),
        "ref_param_gib": rng.uniform(3, 8),
        "activation_gib": rng.uniform(4, 16),              # training peak beyond the resident states
        "vllm_overhead_gib": rng.uniform(1, 4),            # vLLM's activations and graphs
        "kv_min_gib": rng.uniform(1, 6),                   # one max-length request's KV cache
        "kv_saturation_gib": rng.uniform(5, 25),
        "tp_factor": {str(tp): rng.uniform(0.5, 1.0) for tp in (1, 2, 4, 8)},
        "offload_slowdown": [rng.uniform(0.7, 0.98) for _ in range(3)],
        "util_bend": rng.uniform(0.0, 2.0),                # > 0: a peak below the OOM edge
        "util_peak": rng.uniform(0.45, 0.85),
        "tok_s": rng.uniform(500, 1500),
    }


if __name__ == "__main__":
    rng = random.Random(SEED)
    print(json.dumps({f"drawn {i + 1}": draw(rng) for i in range(N)}, indent=1))

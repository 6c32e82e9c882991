"""vLLM's graph capture sizes: the planner sizes graph pools by them (verlsweep.plan.predictor.inputs) and the
throughput space captures up to a swept largest batch (verlsweep.command.resolvers.capture_sizes)."""
from __future__ import annotations


def default_capture_sizes(max_num_seqs: int) -> tuple[int, ...]:
    """The shape of vLLM's default cudagraph capture list when none is given: 1, 2, 4, then steps of 8
    to 256 and of 16 beyond, up to min(2 x max_num_seqs, 512) (vllm/config/vllm.py); only its length
    matters to the planner (graph pool size)."""
    top = min(2 * max_num_seqs, 512)
    sizes = [1, 2, 4, *range(8, 256, 8), *range(256, top + 1, 16)]
    return tuple(s for s in sizes if s <= top)

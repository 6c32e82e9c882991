"""hardware.*: one machine, as a hardware option describes it (conf/hardware/*.yaml, conf/device/*.yaml).

What every option states (its name, its device through the `/device` option it picks, the devices)
has no default. The numbers a profile may leave out default to None, "not stated": the planner then
refuses to predict and says which (verlsweep.plan.predictor.inputs), a real run still launches.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from verlsweep.config.node import ConfigNode

# the numbers a profile may leave out (None): the planner's inputs refuse a profile that lacks one it needs
Number = Literal["hbm_total_gb", "hbm_usable_gb", "idle_reserved_gb", "bf16_tflops", "hbm_bandwidth_gbs",
                 "host_link_gbs", "host_memory_gb"]


@dataclass(frozen=True)
class Hardware(ConfigNode):
    name: str
    device: str                           # npu | cuda: verl's trainer.device, the device monitor's reader
    devices_per_node: int
    nnodes: int
    cpus: int | None                      # CPUs per node the trial's Ray gets; null: this machine's
    visible_devices_env: str | None       # the variable that limits the devices a trial sees
    description: str | None = None
    hbm_total_gb: float | None = None     # npu-smi / nvidia-smi total
    hbm_usable_gb: float | None = None    # torch's total capacity, what vLLM multiplies by its utilization
    idle_reserved_gb: float | None = None
    bf16_tflops: float | None = None
    hbm_bandwidth_gbs: float | None = None
    host_link_gbs: float | None = None
    host_memory_gb: float | None = None

    @property
    def world(self) -> int:
        return self.devices_per_node * self.nnodes

    def stated(self, name: Number) -> float:
        """A number the planner reads, which its inputs have checked is stated."""
        value = getattr(self, name)
        if value is None:
            raise ValueError(f"hardware.{name} is not stated (the planner's inputs check it first)")
        return float(value)

    @property
    def capacity_gb(self) -> float:
        """What processes can allocate on one device (the planner has checked the numbers are stated).

        npu-smi's total minus the runtime's idle reservation, capped by what torch reports as total
        capacity (hbm_usable_gb, the figure vLLM multiplies by gpu_memory_utilization): the two
        describe the same gap, so the smaller is used rather than subtracting it twice.
        """
        return min(self.stated("hbm_usable_gb"), self.stated("hbm_total_gb") - self.stated("idle_reserved_gb"))

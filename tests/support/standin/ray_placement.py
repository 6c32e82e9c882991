"""The stand-in's `unschedulable` mode: a real local Ray asked for CPUs it cannot place.

Faithful to verl 0.9.1's v1 start-up on too few CPUs: verl/trainer/main_ppo.py ``run_ppo`` calls
``ray.init(**ray_kwargs.ray_init)``, which starts a new local instance (the trial's private RAY_TMPDIR);
``TaskRunnerV1.run`` calls ``transfer_queue.init``, which creates the TransferQueueController
(transfer_queue/controller.py, ``@ray.remote(num_cpus=1)``) and then the SimpleStorage bootstrap
(transfer_queue/storage/bootstrap/simple_storage_bootstrap.py ``initialize_simple_storage``):
``get_placement_group(num_data_storage_units, num_cpus_per_actor=1)``, a SPREAD placement group of
one-CPU bundles followed by ``ray.get(placement_group.ready())`` with no timeout
(transfer_queue/utils/common.py, TransferQueue 0.1.8). Simplified: the driver makes these calls itself
instead of a TaskRunner actor, and the dashboard is off (verl leaves it to ray_init).
"""
from __future__ import annotations

from typing import Any


def wait_for_storage(units: int, ray_init: dict[str, Any]) -> None:
    """Start Ray, place the controller, then wait forever on the storage placement group."""
    import ray
    from ray.util.placement_group import placement_group

    kwargs = {k: v for k, v in ray_init.items() if k != "runtime_env" and v is not None}
    kwargs.setdefault("include_dashboard", False)
    ray.init(**kwargs)

    @ray.remote(num_cpus=1)
    class TransferQueueController:
        def ready(self) -> bool:
            return True

    controller = TransferQueueController.options(name="TransferQueueController",
                                                 namespace="transfer_queue").remote()
    ray.get(controller.ready.remote())
    print("TransferQueueController has been created.", flush=True)
    pg = placement_group([{"CPU": 1} for _ in range(units)], strategy="SPREAD")
    ray.get(pg.ready())

"""Probe of a trial's Ray cluster, run as its own process by ray_watch (never inside verl's or the
sweep's process): every `interval` seconds one JSON line with the cluster's resources and its pending
demand, as the GCS keeps it for the autoscaler and `ray status` (GcsClient.get_cluster_resource_state,
ray/autoscaler/v2/sdk.py). No dashboard is needed, and the probe never joins the cluster (no ray.init).

    python ray_probe.py --ray-tmp DIR | --address HOST:PORT  [--interval S]

Only stdlib and ray are imported: the supervisor starts this file by path. A GcsClient pointed at a
dead address blocks for tens of seconds and logs from C++ to stderr, which is why it lives here.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import time
from typing import Any

# ray/_private/node.py writes the GCS port of a head node to <session>/gcs_server_port_<node id>
# (get_port_filename); <RAY_TMPDIR>/ray/session_latest links to the newest session.
PORT_GLOB = os.path.join("ray", "session_latest", "gcs_server_port_*")
SKIP = ("node:", "memory", "object_store_memory", "accelerator_type:")


def gcs_address(ray_tmp: str | None, address: str | None) -> str | None:
    if address:
        from ray._private.services import canonicalize_bootstrap_address

        return canonicalize_bootstrap_address(address)
    for path in glob.glob(os.path.join(ray_tmp or "", PORT_GLOB)):
        text = open(path).read().strip()
        if text.isdigit():
            return f"127.0.0.1:{text}"    # the GCS listens on every interface
    return None


def _resources(pairs: Any) -> dict[str, float]:
    return {k: float(v) for k, v in dict(pairs).items() if not k.startswith(SKIP)}


def snapshot(client: Any) -> dict[str, Any]:
    from ray.core.generated.autoscaler_pb2 import GetClusterResourceStateReply

    reply = GetClusterResourceStateReply()
    reply.ParseFromString(client.get_cluster_resource_state())
    state = reply.cluster_resource_state
    nodes = [{"total": _resources(n.total_resources), "available": _resources(n.available_resources)}
             for n in state.node_states if n.status != 2]           # NodeStatus.DEAD
    gangs = []
    for gang in state.pending_gang_resource_requests:
        # details: "<pg id hex>:<strategy>|<state>" (gcs_autoscaler_state_manager.cc)
        ident, _, rest = gang.details.partition(":")
        gangs.append({"id": ident, "strategy": rest.split("|")[0],
                      "bundles": [_resources(r.resources_bundle) for r in gang.requests]})
    pending = [{"bundle": _resources(r.request.resources_bundle), "count": int(r.count)}
               for r in state.pending_resource_requests]
    return {"time": time.time(), "nodes": nodes, "pending_pgs": gangs, "pending": pending}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--ray-tmp")
    p.add_argument("--address")
    p.add_argument("--interval", type=float, default=3.0)
    args = p.parse_args(argv)
    client = None
    parent = os.getppid()
    while os.getppid() == parent:      # the sweep that reads us is gone (SIGKILLed): so are we
        try:
            if client is None:
                address = gcs_address(args.ray_tmp, args.address)
                if address is not None:
                    # compiled into _raylet.so; ray's _raylet.pyi stub does not list it
                    from ray._raylet import GcsClient  # type: ignore[attr-defined]

                    client = GcsClient(address=address)
            if client is not None:
                print(json.dumps(snapshot(client)), flush=True)
        except Exception as exc:  # noqa: BLE001 - the cluster is starting or gone: say so and keep polling
            print(json.dumps({"error": f"{type(exc).__name__}: {exc}"[:300]}), flush=True)
        time.sleep(args.interval)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""verlsweep.trial.ray_probe: finding a trial's private Ray GCS from its RAY_TMPDIR and reading the
cluster state the GCS keeps for the autoscaler (tests/test_ray_watch.py reads real clusters)."""
from __future__ import annotations

import pytest

from verlsweep.trial.ray_probe import gcs_address, snapshot


def _port_file(tmp_path, text: str) -> None:
    session = tmp_path / "ray" / "session_latest"
    session.mkdir(parents=True, exist_ok=True)
    (session / "gcs_server_port_abc123").write_text(text)


def test_the_gcs_port_file_of_the_latest_session_gives_a_local_address(tmp_path):
    _port_file(tmp_path, "61234\n")
    assert gcs_address(str(tmp_path), None) == "127.0.0.1:61234"


def test_no_session_yet_or_a_half_written_port_file_is_no_address(tmp_path):
    assert gcs_address(str(tmp_path), None) is None
    _port_file(tmp_path, "")
    assert gcs_address(str(tmp_path), None) is None


def test_an_explicit_address_wins_over_the_tmp_dir(tmp_path):
    _port_file(tmp_path, "61234")
    assert gcs_address(str(tmp_path), "10.0.0.2:6379") == "10.0.0.2:6379"


def test_snapshot_reads_live_nodes_pending_gangs_and_requests_without_bookkeeping_resources():
    autoscaler = pytest.importorskip("ray.core.generated.autoscaler_pb2")
    reply = autoscaler.GetClusterResourceStateReply()
    state = reply.cluster_resource_state
    alive = state.node_states.add()
    alive.total_resources.update({"CPU": 8.0, "NPU": 8.0, "memory": 1e9, "node:10.0.0.2": 1.0})
    alive.available_resources.update({"CPU": 2.0, "NPU": 0.0})
    dead = state.node_states.add()
    dead.status = 2                                            # NodeStatus.DEAD
    dead.total_resources.update({"CPU": 99.0})
    gang = state.pending_gang_resource_requests.add()
    gang.details = "a1b2c3:STRICT_PACK|PENDING"
    gang.requests.add().resources_bundle.update({"CPU": 1.0, "NPU": 1.0})
    request = state.pending_resource_requests.add()
    request.request.resources_bundle.update({"CPU": 1.0})
    request.count = 3

    class Client:
        def get_cluster_resource_state(self):
            return reply.SerializeToString()

    snap = snapshot(Client())
    assert snap["nodes"] == [{"total": {"CPU": 8.0, "NPU": 8.0}, "available": {"CPU": 2.0, "NPU": 0.0}}]
    assert snap["pending_pgs"] == [{"id": "a1b2c3", "strategy": "STRICT_PACK",
                                    "bundles": [{"CPU": 1.0, "NPU": 1.0}]}]
    assert snap["pending"] == [{"bundle": {"CPU": 1.0}, "count": 3}]

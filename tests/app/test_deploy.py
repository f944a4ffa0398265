"""Deployment files: parsed and checked for structure (no Docker engine or cluster here)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from mgmatch.app.config import load_config
from mgmatch.app.keys import Keys
from mgmatch.app.metrics import DOCUMENTED
from mgmatch.app.runtime import Runtime
from mgmatch.app.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"


def _compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_dockerfile_has_cpu_and_cuda_targets_without_torch():
    text = (ROOT / "Dockerfile").read_text()
    stages = re.findall(r"^FROM\s+\S+\s+AS\s+(\S+)", text, flags=re.M)
    assert stages == ["build", "cpu", "cuda"]
    assert "onnxruntime-gpu" in text and "HEALTHCHECK" in text and "USER mgmatch" in text
    for src in re.findall(r"^COPY\s+(?!--from)(\S+)", text, flags=re.M):
        if src != "README.md":  # the lead's README, present in a release checkout
            assert (ROOT / src).exists(), src
    # the base is a build argument (python:3.11-slim by default; a local Debian base where no registry is)
    assert re.search(r"^ARG BASE=python:3\.11-slim$", text, flags=re.M)
    assert re.findall(r"^FROM\s+(\S+)\s+AS\s+(?:build|cpu)$", text, flags=re.M) == ["${BASE}", "${BASE}"]
    # the wheel with its extras, no hand-kept requirements file: pyproject is the one list
    assert "requirements" not in text and not list(DEPLOY.rglob("requirements*.txt"))
    cpu = text[text.index("AS cpu"):text.index("AS cuda")]
    assert re.search(r"^ARG EXTRAS=grpc$", cpu, flags=re.M)
    assert 'pip install --no-cache-dir "$(ls /wheels/mgmatch-*.whl)[${EXTRAS}]"' in cpu and "--no-deps" not in cpu
    assert "torch" not in cpu


def test_compose_services_healthchecks_redis_aof_and_gpu():
    c = _compose()
    services = c["services"]
    assert set(services) == {"redis", "api", "matchmaker", "solver", "inference", "prometheus", "grafana"}
    for name, svc in services.items():
        assert "healthcheck" in svc, name
    assert "--appendonly" in services["redis"]["command"] and "yes" in services["redis"]["command"]
    devices = services["inference"]["deploy"]["resources"]["reservations"]["devices"]
    assert devices[0]["capabilities"] == ["gpu"]
    assert services["solver"]["deploy"]["replicas"] >= 2
    for name in ("api", "matchmaker", "solver", "inference"):
        env = services[name]["environment"]
        assert env["MGMATCH_STORE"] == "redis" and env["MGMATCH_REDIS_URL"].startswith("redis://redis:")
    assert services["api"]["command"][:1] == ["serve"] and "--no-workers" in services["api"]["command"]
    assert [services[k]["command"][:2] for k in ("matchmaker", "solver", "inference")] == [
        ["worker", "matchmaker"], ["worker", "solver"], ["worker", "inference"]]
    # every bind-mounted file exists
    for svc in services.values():
        for v in svc.get("volumes", []):
            src = v.split(":")[0]
            if src.startswith("./"):
                assert (ROOT / src).exists(), src


@pytest.mark.service
def test_compose_config_validates_when_a_client_is_available():
    docker = shutil.which("docker")
    if docker is None:
        pytest.skip("no docker client installed")
    probe = subprocess.run([docker, "compose", "version"], capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        pytest.skip("docker client has no compose plugin")
    out = subprocess.run([docker, "compose", "-f", str(ROOT / "docker-compose.yml"), "config", "-q"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr


def test_prometheus_scrapes_every_process_and_dashboard_uses_documented_metrics():
    prom = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    jobs = {j["job_name"] for j in prom["scrape_configs"]}
    assert jobs == {"mgmatch-api", "mgmatch-matchmaker", "mgmatch-solver", "mgmatch-inference"}
    dash = json.loads((DEPLOY / "grafana" / "dashboards" / "mgmatch.json").read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    used = {re.sub(r"_(bucket|sum|count)$", "", m) for e in exprs for m in re.findall(r"mgmatch_[a-z_]+", e)}
    assert used and used <= set(DOCUMENTED), used - set(DOCUMENTED)
    assert {"mgmatch_stage_duration_seconds", "mgmatch_matchmaker_matches_total", "mgmatch_tickets_queue_depth",
            "mgmatch_solver_status_total", "mgmatch_model_info"} <= used
    prov = yaml.safe_load((DEPLOY / "grafana" / "provisioning" / "dashboards" / "mgmatch.yml").read_text())
    assert prov["providers"][0]["options"]["path"] == "/var/lib/grafana/dashboards"


def _k8s_docs() -> list[dict]:
    docs = []
    for path in sorted((DEPLOY / "k8s").glob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    return docs


def test_kubernetes_manifests_are_complete():
    docs = _k8s_docs()
    kinds = {(d["kind"], d["metadata"]["name"]) for d in docs}
    for want in [("Deployment", "api"), ("Service", "api"), ("HorizontalPodAutoscaler", "api"),
                 ("Deployment", "matchmaker"), ("Deployment", "solver"), ("ScaledObject", "solver"),
                 ("Deployment", "inference"), ("StatefulSet", "redis"), ("Service", "redis")]:
        assert want in kinds, want
    for d in docs:
        if d["kind"] != "Deployment":
            continue
        pod = d["spec"]["template"]
        assert d["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
        c = pod["spec"]["containers"][0]
        assert c["readinessProbe"] and c["livenessProbe"] and c["resources"]["requests"], d["metadata"]["name"]
        assert c["securityContext"]["runAsNonRoot"] is True
    inf = next(d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == "inference")
    assert inf["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == 1
    # KEDA scales solvers on the lag of each configured pool's jobs stream (names from app/keys.py)
    scaled = next(d for d in docs if d["kind"] == "ScaledObject" and d["metadata"]["name"] == "solver")
    streams = {t["metadata"]["stream"] for t in scaled["spec"]["triggers"]}
    pools = [p.name for p in load_config(DEPLOY / "config" / "service.yaml").pools]
    assert streams == {Keys("mgm").jobs(p) for p in pools}
    assert {t["metadata"]["consumerGroup"] for t in scaled["spec"]["triggers"]} == {"solvers"}


@pytest.mark.service
def test_kustomize_renders_when_kubectl_is_available():
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("no kubectl installed")
    out = subprocess.run([kubectl, "kustomize", str(DEPLOY)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    rendered = [d for d in yaml.safe_load_all(out.stdout) if d]
    assert any(d["kind"] == "ConfigMap" and d["metadata"]["name"].startswith("mgmatch-config") for d in rendered)


def test_shipped_service_config_builds_a_runtime():
    rt = Runtime.build(Settings(config=DEPLOY / "config" / "service.yaml"))
    assert set(rt.pools) == {"3v3", "12v12"}
    assert rt.experiments.for_pool("3v3") is not None


@pytest.mark.service
def test_service_processes_never_import_torch():
    code = ("import sys; from mgmatch.app.cli import _load_commands; _load_commands(); "
            "import mgmatch.app.api, mgmatch.app.workers, mgmatch.app.store.redis, mgmatch.models.runtime; "
            "bad = [m for m in sys.modules if m == 'torch' or m.startswith('torch.')]; print(bad); sys.exit(1 if bad else 0)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr

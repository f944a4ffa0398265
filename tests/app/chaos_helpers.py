"""Helpers for the chaos and fuzz tests: hostile request bodies, metric labels, readable reports."""

from __future__ import annotations

import json
import shutil

from prometheus_client.parser import text_string_to_metric_families

REDIS_SERVER = shutil.which("redis-server")


def deep_json(kind: str, depth: int) -> str:
    """A JSON value nested ``depth`` levels deep: ``{"a": {"a": … 1 …}}`` or ``[[[… 1 …]]]``."""
    if kind == "object":
        return '{"a": ' * depth + "1" + "}" * depth
    return "[" * depth + "1" + "]" * depth


def nested_not(depth: int, literal: list) -> dict:
    """The condition ``{"not": {"not": … literal …}}`` with ``depth`` nots (built without recursion)."""
    cond: object = literal
    for _ in range(depth):
        cond = {"not": cond}
    return cond  # type: ignore[return-value]


def route_labels(metrics_text: str, metric: str = "mgmatch_http_requests") -> set[str]:
    """The ``route`` label values of an HTTP metric in a Prometheus exposition."""
    out = set()
    for fam in text_string_to_metric_families(metrics_text):
        if fam.name == metric:
            out |= {s.labels["route"] for s in fam.samples if "route" in s.labels}
    return out


def assert_client_error(resp, what: str) -> None:
    """A 4xx with the service's error shape ``{"error": {"field", "message"}}``."""
    assert 400 <= resp.status_code < 500, f"{what}: HTTP {resp.status_code} {resp.text[:300]}"
    try:
        body = resp.json()
    except json.JSONDecodeError:
        raise AssertionError(f"{what}: HTTP {resp.status_code}, body is not JSON: {resp.text[:200]!r}") from None
    err = body.get("error") if isinstance(body, dict) else None
    assert isinstance(err, dict) and "field" in err and "message" in err, f"{what}: error shape {body!r:.300}"


def describe(report: dict) -> str:
    """One readable block of a chaos report, for assertion messages."""
    keys = ("accepted", "accepted_before_flush", "accepted_after_flush", "gave_up", "rejected", "matched", "lost",
            "lost_by_status", "lost_sample", "leftover", "transient_404", "flushed_not_404", "flushed_codes", "flushed_not_404_sample",
            "double_booked", "double_booked_sample", "inconsistent_tickets", "malformed_matches", "http_codes",
            "transport_errors", "transport_error_kinds", "transport_error_window_s",
            "players_per_s", "wait_p50_s", "wait_p99_s", "settled", "elapsed_s")
    lines = [f"{k}={report.get(k)!r}" for k in keys]
    lines += [f"event {e['t']}s {e['what']}" for e in report.get("events", [])]
    lines += [f"{name}: {p}" for name, p in report.get("processes", {}).items()]
    return "\n".join(lines)

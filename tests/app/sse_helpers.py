"""A Server-Sent Events client for the tests: reads a stream on a thread into a list of events."""

from __future__ import annotations

import json
import threading
import time

import httpx


def parse(lines) -> list[dict]:
    """SSE blocks → [{"id", "event", "data" (JSON-decoded), "comment"}] in order."""
    out, cur = [], {}
    for line in lines:
        if line == "":
            if cur:
                out.append(cur)
            cur = {}
        elif line.startswith(":"):
            cur.setdefault("comment", line[1:].strip())
        else:
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            cur[name] = json.loads(value) if name == "data" else value
    return out


class Listener:
    """``GET url`` as SSE on a thread; ``events`` holds the events (not comments) as they arrive, with the
    receipt time in ``at``; ``done`` is set when the server ended the stream."""

    def __init__(self, url: str, headers: dict | None = None, timeout: float = 60.0):
        self.url, self.headers, self.timeout = url, headers or {}, timeout
        self.events: list[dict] = []
        self.comments = 0
        self.status: int | None = None
        self.done = threading.Event()
        self.opened = threading.Event()  # the server answered: a stream "from now on" starts before this
        self.error: BaseException | None = None
        self._stop = False
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Listener:
        self.thread.start()
        assert self.opened.wait(30), "the event stream did not open"
        return self

    def __exit__(self, *exc) -> None:
        self._stop = True

    def _run(self) -> None:
        try:
            with httpx.stream("GET", self.url, headers=self.headers,
                              timeout=httpx.Timeout(self.timeout, connect=5)) as r:
                self.status = r.status_code
                self.opened.set()
                cur: dict = {}
                for line in r.iter_lines():
                    if self._stop:
                        return
                    if line == "":
                        if "event" in cur:
                            cur["at"] = time.time()
                            self.events.append(cur)
                        elif cur.get("comment") is not None:
                            self.comments += 1
                        cur = {}
                    elif line.startswith(":"):
                        cur["comment"] = line[1:].strip()
                    else:
                        name, _, value = line.partition(":")
                        value = value[1:] if value.startswith(" ") else value
                        cur[name] = json.loads(value) if name == "data" else value
        except BaseException as err:  # noqa: BLE001 - reported to the test through .error
            self.error = err
        finally:
            self.opened.set()
            self.done.set()

    def wait_for(self, pred, timeout: float = 30.0) -> list[dict]:
        deadline = time.time() + timeout
        while time.time() < deadline:
            if pred(self.events):
                return list(self.events)
            if self.done.is_set() and not pred(self.events):
                break
            time.sleep(0.02)
        raise AssertionError(f"events not as expected within {timeout}s: {[e.get('event') for e in self.events]} "
                             f"(status {self.status}, error {self.error!r})")


class Reconnecting:
    """An SSE client that reconnects whenever its stream ends or fails, sending the last id it got as
    ``Last-Event-ID`` (what a browser's EventSource does); ``url`` may be changed between connections.
    ``events`` holds every event received, across connections, with its receipt time in ``at``."""

    def __init__(self, url: str, headers: dict | None = None, retry_s: float = 0.2):
        self.url, self.headers, self.retry_s = url, headers or {}, retry_s
        self.events: list[dict] = []
        self.connections = 0
        self.opened = threading.Event()
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Reconnecting:
        self.thread.start()
        assert self.opened.wait(30), "the event stream did not open"
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()

    @property
    def last_id(self) -> str | None:
        ids = [e["id"] for e in self.events if e.get("id")]
        return ids[-1] if ids else None

    def _run(self) -> None:
        while not self._stop.is_set():
            headers = dict(self.headers)
            if self.last_id:
                headers["Last-Event-ID"] = self.last_id
            try:
                with httpx.stream("GET", self.url, headers=headers, timeout=httpx.Timeout(5, connect=2)) as r:
                    if r.status_code != 200:
                        raise httpx.HTTPError(f"status {r.status_code}")
                    self.connections += 1
                    self.opened.set()
                    cur: dict = {}
                    for line in r.iter_lines():
                        if self._stop.is_set():
                            return
                        if line == "":
                            if "event" in cur and cur["event"] != "error":
                                cur["at"] = time.time()
                                self.events.append(cur)
                            cur = {}
                        elif not line.startswith(":"):
                            name, _, value = line.partition(":")
                            value = value[1:] if value.startswith(" ") else value
                            cur[name] = json.loads(value) if name == "data" else value
            except (httpx.HTTPError, OSError):
                pass
            self._stop.wait(self.retry_s)

"""A streamed completion read on a thread of its own, for the server tests that act while streams
are in flight (a graceful stop, a dead engine): its `data:` payloads as they come."""
import http.client
import json
import threading


class SseStream(threading.Thread):
    """POSTs `body` (stream: true) to /v1/completions. `events`: the data payloads, "[DONE]"
    included; `first` is set at the first one (or at the end); `status` and `error` (an exception
    seen, for the assertion's message)."""

    def __init__(self, base, body, timeout=120):
        super().__init__(daemon=True)
        host, port = base.split("//", 1)[1].rsplit(":", 1)
        self.conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
        self.body = json.dumps(dict(body, stream=True))
        self.events = []
        self.first = threading.Event()
        self.status = None
        self.error = None

    def run(self):
        try:
            self.conn.request("POST", "/v1/completions", self.body, {"Content-Type": "application/json"})
            res = self.conn.getresponse()
            self.status = res.status
            for line in res:
                line = line.decode().strip()
                if line.startswith("data: "):
                    self.events.append(line[6:])
                    self.first.set()
        except Exception as e:  # noqa: BLE001 - kept for the assertion's message
            self.error = repr(e)
        finally:
            self.conn.close()
            self.first.set()

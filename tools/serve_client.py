"""A small asyncio HTTP/1.1 client for `minivllm serve`, shared by tools/bench_serve.py and
tools/soak_serve.py. Standard library only, so that the client side costs little at hundreds of
concurrent streams and needs nothing installed: one connection per request, chunked server-sent
events read as they arrive, with a timestamp per event.
"""
import asyncio
import json
import re
import subprocess
import time


class Result:
    """One request as the client saw it."""

    def __init__(self):
        self.status = 0
        self.ok = False
        self.error = ""
        self.start = 0.0
        self.chunk_times = []  # arrival of each SSE chunk that carried text
        self.text = ""
        self.completion_tokens = 0
        self.prompt_tokens = 0
        self.finish_reason = None
        self.texts = {}           # by choice index (n > 1)
        self.finish_reasons = {}  # by choice index
        self.cancelled = False
        self.end = 0.0

    @property
    def ttft(self):
        return self.chunk_times[0] - self.start if self.chunk_times else None

    @property
    def e2e(self):
        return self.end - self.start


async def _read_chunked(reader):
    """Yields the pieces of a chunked body as they arrive."""
    while True:
        size_line = await reader.readline()
        if not size_line:
            return
        size = int(size_line.split(b";")[0].strip() or b"0", 16)
        if size == 0:
            await reader.readline()
            return
        data = await reader.readexactly(size)
        await reader.readexactly(2)
        yield data


async def post(host, port, path, body, api_key=None, stream=False, cancel_after=None, raw=None, timeout=600):
    """POSTs `body` (or the bytes `raw`); streams SSE when `stream`. `cancel_after`: close the
    connection after that many text chunks (a client that goes away)."""
    r = Result()
    r.start = time.perf_counter()
    payload = raw if raw is not None else json.dumps(body).encode()
    head = [f"POST {path} HTTP/1.1", f"Host: {host}:{port}", "Content-Type: application/json",
            f"Content-Length: {len(payload)}", "Connection: close"]
    if api_key:
        head.append(f"Authorization: Bearer {api_key}")
    writer = None
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + payload)
        await writer.drain()
        status_line = await asyncio.wait_for(reader.readline(), timeout)
        if not status_line:  # the server closed the connection (or died) without answering
            raise ConnectionResetError("the connection closed before a status line")
        r.status = int(status_line.split()[1])
        headers = {}
        while True:
            line = await reader.readline()
            if line in (b"\r\n", b"\n", b""):
                break
            k, _, v = line.decode().partition(":")
            headers[k.strip().lower()] = v.strip()
        if headers.get("transfer-encoding") == "chunked":
            pieces = _read_chunked(reader)
        else:
            n = int(headers.get("content-length", "0"))
            data = await reader.readexactly(n) if n else await reader.read()

            async def one():
                yield data
            pieces = one()
        if r.status != 200 or not stream:
            body_bytes = b"".join([p async for p in pieces])
            r.end = time.perf_counter()
            try:
                j = json.loads(body_bytes)
            except ValueError:
                j = {}
            if r.status != 200:
                r.error = j.get("error", {}).get("message", body_bytes[:200].decode(errors="replace"))
                return r
            r.ok = True
            for c in j["choices"]:
                r.texts[c["index"]] = c.get("text") or (c.get("message") or {}).get("content") or ""
                r.finish_reasons[c["index"]] = c.get("finish_reason")
            choice = j["choices"][0]
            r.text = choice.get("text") or (choice.get("message") or {}).get("content", "")
            r.finish_reason = choice.get("finish_reason")
            usage = j.get("usage") or {}
            r.completion_tokens = usage.get("completion_tokens", 0)
            r.prompt_tokens = usage.get("prompt_tokens", 0)
            return r
        buf = b""
        async for piece in pieces:
            buf += piece
            while b"\n\n" in buf:
                event, buf = buf.split(b"\n\n", 1)
                if not event.startswith(b"data: "):
                    continue  # an SSE comment (keep-alive)
                data = event[6:]
                if data == b"[DONE]":
                    r.ok = r.finish_reason is not None
                    continue
                j = json.loads(data)
                if "error" in j:
                    r.error = j["error"].get("message", "error event")
                    continue
                if j.get("usage"):
                    r.completion_tokens = j["usage"]["completion_tokens"]
                    r.prompt_tokens = j["usage"]["prompt_tokens"]
                for c in j.get("choices", []):
                    delta = c.get("delta") or {}
                    text = c.get("text") or delta.get("content") or ""
                    # A token's chunk, with or without text (a model served without a tokenizer
                    # streams empty texts); not the chat's opening role-only delta, nor the final
                    # chunk that only carries finish_reason.
                    carries_token = text or c.get("logprobs") or (
                        c.get("finish_reason") is None and not (delta.get("role") and not delta.get("content")))
                    if carries_token:
                        r.chunk_times.append(time.perf_counter())
                        r.text += text
                    i = c.get("index", 0)
                    r.texts[i] = r.texts.get(i, "") + text
                    if c.get("finish_reason"):
                        r.finish_reason = c["finish_reason"]
                        r.finish_reasons[i] = c["finish_reason"]
                if cancel_after is not None and len(r.chunk_times) >= cancel_after:
                    r.cancelled = True
                    r.end = time.perf_counter()
                    return r
        r.end = time.perf_counter()
        return r
    except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError, ValueError) as e:
        r.error = f"{type(e).__name__}: {e}"
        r.end = time.perf_counter()
        return r
    finally:
        if writer is not None:
            writer.close()


def get(base, path):
    """(status, text) of a GET, synchronously."""
    import urllib.error
    import urllib.request
    try:
        with urllib.request.urlopen(base + path, timeout=30) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def metrics(base):
    """{name: value} of /metrics, histogram buckets and labelled counters left out."""
    _, text = get(base, "/metrics")
    out = {}
    for line in text.splitlines():
        if line.startswith("#") or not line.strip() or "le=" in line or "finished_reason" in line:
            continue
        name_labels, value = line.rsplit(" ", 1)
        out[name_labels.split("{", 1)[0]] = float(value)
    return out


def start_server(binary, model, extra):
    """Starts `minivllm serve` on a free port; returns (process, base url)."""
    proc = subprocess.Popen([binary, "serve", "--model", model, "--port", "0"] + extra,
                            stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    m = re.search(r"at (http://([\d.]+):(\d+))/v1", line)
    if not m:
        proc.kill()
        raise SystemExit(f"serve did not start: {line!r}")
    return proc, m.group(1)


def split_base(base):
    m = re.match(r"http://([^:/]+):(\d+)", base)
    return m.group(1), int(m.group(2))


def percentile(values, p):
    if not values:
        return float("nan")
    s = sorted(values)
    k = (len(s) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)

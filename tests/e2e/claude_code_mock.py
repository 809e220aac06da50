#!/usr/bin/env python3
"""A scripted mock of the Anthropic Messages API, loopback only.

Adapted from the project's offline evaluation kit (shared/eval/claude_code_mock.py,
written for the issue 39 trial run of Claude Code 2.1.197): the same SSE replies and
request log, with this test's scenarios, a free port (MOCK_PORT=0, the address is
printed on stdout) and no third-party dependency (Python 3.11 standard library).

Every request (method, path, selected headers, JSON body) is appended as one
JSON line to $MOCK_LOG, tagged with the current scenario (read from
$MOCK_SCENARIO_FILE on each request), so one file holds every session's traffic.

The replies are stateless: for the main agent call (a request that offers the
Edit tool) the mock counts the assistant turns already in `messages` and
plays the scenario's next step. Any other call (title / topic generation,
quota checks, ...) gets a short valid text reply.
"""
import json
import os
import re
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOG = os.environ["MOCK_LOG"]
SCEN_FILE = os.environ["MOCK_SCENARIO_FILE"]
PORT = int(os.environ.get("MOCK_PORT", "0"))
lock = threading.Lock()

STOCK_PY = "inventory/stock.py"


def scenario():
    try:
        with open(SCEN_FILE) as f:
            return f.read().strip() or "default"
    except FileNotFoundError:
        return "default"


def log(entry):
    with lock:
        with open(LOG, "a") as f:
            f.write(json.dumps(entry) + "\n")


def cwd_of(body):
    sysp = body.get("system")
    if isinstance(sysp, list):
        sysp = "\n".join(p.get("text", "") for p in sysp if isinstance(p, dict))
    text = (sysp or "") + "\n" + json.dumps(body.get("messages", []))
    m = re.search(r"[Ww]orking directory: ([^\s\\\"]+)", text)
    return m.group(1) if m else os.getcwd()


def tool_names(body):
    return [t.get("name") for t in body.get("tools", []) or [] if isinstance(t, dict)]


def last_tool_result_text(body):
    msgs = body.get("messages", [])
    if not msgs or msgs[-1].get("role") != "user":
        return None
    c = msgs[-1].get("content")
    if not isinstance(c, list):
        return None
    for part in c:
        if isinstance(part, dict) and part.get("type") == "tool_result":
            inner = part.get("content")
            if isinstance(inner, list):
                inner = "\n".join(p.get("text", "") for p in inner if isinstance(p, dict))
            return str(inner)
    return None


def plan(scen, cwd, tools):
    """A list of steps: ("tool", name, input) or ("text", str)."""
    stock = os.path.join(cwd, STOCK_PY)
    if scen.startswith("fix"):
        # Session 1: the fix that memory should hand to session 2.
        return [
            ("tool", "Read", {"file_path": stock}),
            ("tool", "Edit", {"file_path": stock,
                              "old_string": 'total += item["price"] * item["qty"]',
                              "new_string": 'total += item.get("price", 0) * item["qty"]'}),
            ("text", "Fixed total_value in inventory/stock.py: items without a price now count as 0 "
                     "(item.get(\"price\", 0)) instead of raising KeyError 'price'."),
        ]
    if scen.startswith("related"):
        # Session 2: the related task, answered without reading anything,
        # so the only copy of session 1's fix in its first request is
        # what the hooks handed over.
        return [("text", "Noted: total_value needs the same treatment for qty.")]
    if scen.startswith("chat"):
        return [("text", "Nothing to do from here: no remote is configured.")]
    if scen.startswith("other"):
        # A session in another repository.
        return [
            ("tool", "Read", {"file_path": os.path.join(cwd, "README.md")}),
            ("text", "Read the README; nothing to change."),
        ]
    if scen.startswith("mcp"):
        name = next((t for t in tools if t and t.startswith("mcp__precedent") and "search" in t),
                    "mcp__precedent__search_memory")
        return [
            ("tool", name, {"query": "total_value KeyError price"}),
            ("text", "MOCK: the memory search came back (see tool_result)."),
        ]
    if scen.startswith("timing"):
        # One Read then a final answer: a turn of two model calls.
        return [
            ("tool", "Read", {"file_path": stock}),
            ("text", "Read the file; nothing to change."),
        ]
    return [("text", "MOCK: hello from the mock.")]


def assistant_turns(body):
    return sum(1 for m in body.get("messages", []) if m.get("role") == "assistant")


def build_reply(body, scen):
    tools = tool_names(body)
    main_call = "Edit" in tools or "Read" in tools
    model = body.get("model", "claude-mock")
    if not main_call:
        # auxiliary call: title / topic / quota etc.
        txt = '{"isNewTopic": false, "title": null}'
        sysp = json.dumps(body.get("system", ""))
        if "title" in sysp.lower():
            txt = '{"title": "Fix total_value KeyError"}'
        return model, [{"type": "text", "text": txt}], "end_turn", "aux"
    steps = plan(scen, cwd_of(body), tools)
    i = min(assistant_turns(body), len(steps) - 1)
    step = steps[i]
    if step[0] == "tool":
        tid = "toolu_" + uuid.uuid4().hex[:24]
        return model, [{"type": "text", "text": f"Step {i+1}: calling {step[1]}."},
                       {"type": "tool_use", "id": tid, "name": step[1], "input": step[2]}], "tool_use", f"main:{i}"
    return model, [{"type": "text", "text": step[1]}], "end_turn", f"main:{i}"


class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def _body(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        try:
            return json.loads(raw) if raw else None
        except Exception:
            return {"_raw": raw.decode("utf-8", "replace")}

    def _send_json(self, code, obj):
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("request-id", "req_mock_" + uuid.uuid4().hex[:12])
        self.end_headers()
        self.wfile.write(data)

    def _hdrs(self):
        keep = ("user-agent", "anthropic-version", "anthropic-beta", "x-app", "content-type", "x-stainless-helper-method")
        return {k: v for k, v in self.headers.items() if k.lower() in keep}

    def do_CONNECT(self):  # any proxied (non-loopback) attempt lands here
        log({"t": time.time(), "scenario": scenario(), "method": "CONNECT", "path": self.path})
        self.send_response(403)
        self.send_header("Content-Length", "0")
        self.send_header("Connection", "close")
        self.end_headers()

    def do_GET(self):
        log({"t": time.time(), "scenario": scenario(), "method": "GET", "path": self.path, "headers": self._hdrs()})
        if self.path.startswith("/v1/models"):
            return self._send_json(200, {"data": [], "has_more": False, "first_id": None, "last_id": None})
        self._send_json(404, {"type": "error", "error": {"type": "not_found_error", "message": "mock: no such path"}})

    def do_HEAD(self):
        log({"t": time.time(), "scenario": scenario(), "method": "HEAD", "path": self.path})
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self):
        body = self._body()
        scen = scenario()
        entry = {"t": time.time(), "scenario": scen, "method": "POST", "path": self.path,
                 "headers": self._hdrs(), "body": body}
        path = re.sub(r"^https?://[^/]+", "", self.path).split("?")[0]
        if path == "/v1/messages/count_tokens":
            log(entry)
            return self._send_json(200, {"input_tokens": len(json.dumps(body)) // 4})
        if path != "/v1/messages":
            log(entry)
            return self._send_json(404, {"type": "error", "error": {"type": "not_found_error", "message": "mock"}})
        model, content, stop, kind = build_reply(body, scen)
        entry["reply_kind"] = kind
        entry["reply"] = content
        log(entry)
        mid = "msg_" + uuid.uuid4().hex[:24]
        usage = {"input_tokens": 100, "output_tokens": 20, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
        if not body.get("stream"):
            return self._send_json(200, {"id": mid, "type": "message", "role": "assistant", "model": model,
                                         "content": content, "stop_reason": stop, "stop_sequence": None,
                                         "usage": usage})
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.send_header("request-id", "req_mock_" + uuid.uuid4().hex[:12])
        self.end_headers()

        def ev(name, obj):
            self.wfile.write(f"event: {name}\ndata: {json.dumps(obj)}\n\n".encode())
            self.wfile.flush()

        ev("message_start", {"type": "message_start", "message": {
            "id": mid, "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": 100, "output_tokens": 1, "cache_creation_input_tokens": 0,
                      "cache_read_input_tokens": 0}}})
        ev("ping", {"type": "ping"})
        for idx, part in enumerate(content):
            if part["type"] == "text":
                ev("content_block_start", {"type": "content_block_start", "index": idx,
                                           "content_block": {"type": "text", "text": ""}})
                ev("content_block_delta", {"type": "content_block_delta", "index": idx,
                                           "delta": {"type": "text_delta", "text": part["text"]}})
            else:
                ev("content_block_start", {"type": "content_block_start", "index": idx,
                                           "content_block": {"type": "tool_use", "id": part["id"],
                                                             "name": part["name"], "input": {}}})
                js = json.dumps(part["input"])
                half = len(js) // 2
                for chunk in (js[:half], js[half:]):
                    ev("content_block_delta", {"type": "content_block_delta", "index": idx,
                                               "delta": {"type": "input_json_delta", "partial_json": chunk}})
            ev("content_block_stop", {"type": "content_block_stop", "index": idx})
        ev("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                             "usage": {"output_tokens": 20}})
        ev("message_stop", {"type": "message_stop"})
        self.close_connection = True


if __name__ == "__main__":
    srv = ThreadingHTTPServer(("127.0.0.1", PORT), H)
    print(f"mock listening on http://127.0.0.1:{srv.server_address[1]}, log {LOG}", flush=True)
    srv.serve_forever()

"""A webhook receiver for the notification benchmark: records, for each message, its arrival
time, its kind and, per alert it carries, the alert id and its last_seen_ns (for a new alert,
the time of the event that raised it: a threshold rule raises at its last event, not its
first), one JSON line each to OUT. Answers 200.

Usage: webhook_sink.py PORT OUT
"""

import http.server
import json
import sys
import threading
import time

port, out = int(sys.argv[1]), sys.argv[2]
lock = threading.Lock()
sink = open(out, "a", buffering=1)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        arrived = time.time_ns()
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        doc = json.loads(body)
        alerts = [doc["alert"]] if "alert" in doc else doc.get("alerts", [])
        with lock:
            sink.write(json.dumps({
                "arrived_ns": arrived,
                "kind": doc.get("kind"),
                "delivery_id": doc.get("delivery_id"),
                "alerts": [[a["id"], a["last_seen_ns"]] for a in alerts],
            }) + "\n")
        self.send_response(200)
        self.send_header("content-length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args):
        pass


http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()

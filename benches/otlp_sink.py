"""A stand-in OpenTelemetry collector for measuring what exporting spans costs.

Takes every OTLP/HTTP POST, answers 200 at once, and prints every 30 s how many requests
and bytes it took (it decodes nothing: the cost measured is the server's, not a
collector's). Standard library only, so it runs with any python3:

    python3 benches/otlp_sink.py 4318 &
    SWITCHBOARD_OTLP_ENDPOINT=http://127.0.0.1:4318 cargo bench --bench load -- send_message

The server started by the benchmark inherits the variable (docs/benchmarks.md).
"""

import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

taken = {"requests": 0, "bytes": 0}


class Sink(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        length = int(self.headers.get("content-length", "0"))
        self.rfile.read(length)
        taken["requests"] += 1
        taken["bytes"] += length
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def report():
    while True:
        time.sleep(30)
        print(time.strftime("%X"), taken, flush=True)


if __name__ == "__main__":
    threading.Thread(target=report, daemon=True).start()
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 4318
    ThreadingHTTPServer(("127.0.0.1", port), Sink).serve_forever()

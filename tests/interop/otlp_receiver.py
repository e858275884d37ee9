"""An OTLP/HTTP trace receiver, as a collector is one: it takes POSTs to /v1/traces,
decodes each body as an `ExportTraceServiceRequest` with the official
`opentelemetry-proto` package (protobuf), and keeps every span.

Usage: otlp_receiver.py SPANS SECONDS [QUIET]
Prints {"port": N} when it listens; then, once it holds SPANS spans (and no span came
for QUIET seconds, 0 by default) or SECONDS have passed, one JSON object: the spans (ids as hex, attributes as a mapping, events, status)
and each request's path and content type. The Rust test (tests/it/otlp.rs) checks them.
"""

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

SPANS = []
REQUESTS = []
LOCK = threading.Condition()


def value(any_value):
    return getattr(any_value, any_value.WhichOneof("value")) if any_value.WhichOneof("value") else None


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        spans = []
        for resource_spans in request.resource_spans:
            resource = {kv.key: value(kv.value) for kv in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    spans.append({
                        "trace_id": span.trace_id.hex(),
                        "span_id": span.span_id.hex(),
                        "parent_span_id": span.parent_span_id.hex(),
                        "trace_state": span.trace_state,
                        "name": span.name,
                        "start": span.start_time_unix_nano,
                        "end": span.end_time_unix_nano,
                        "attributes": {kv.key: value(kv.value) for kv in span.attributes},
                        "events": [{"name": e.name, "attributes": {kv.key: value(kv.value) for kv in e.attributes}}
                                   for e in span.events],
                        "status": {"code": span.status.code, "message": span.status.message},
                        "resource": resource,
                        "scope": scope_spans.scope.name,
                    })
        answer = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)
        with LOCK:
            REQUESTS.append({"path": self.path, "content_type": self.headers.get("content-type")})
            SPANS.extend(spans)
            LOCK.notify_all()

    def log_message(self, *args):
        pass


def main():
    want, seconds = int(sys.argv[1]), float(sys.argv[2])
    quiet = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(json.dumps({"port": server.server_address[1]}), flush=True)
    deadline = time.monotonic() + seconds
    with LOCK:
        while len(SPANS) < want and time.monotonic() < deadline:
            LOCK.wait(timeout=max(0.0, deadline - time.monotonic()))
        # Then until the spans stop coming for `quiet` seconds.
        while quiet > 0 and time.monotonic() < deadline:
            held = len(SPANS)
            LOCK.wait(timeout=min(quiet, max(0.0, deadline - time.monotonic())))
            if len(SPANS) == held:
                break
        out = {"spans": list(SPANS), "requests": list(REQUESTS)}
    server.shutdown()
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()

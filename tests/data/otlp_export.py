"""Sends log records to an OTLP/HTTP endpoint with the OpenTelemetry Python SDK's own exporter
(`opentelemetry-exporter-otlp-proto-http`, protobuf), as an instrumented application does.

Usage: otlp_export.py ENDPOINT COUNT
Each record is an SSH failure for root from 203.0.113.N, logged at WARNING inside a span (so it
carries a trace and span id), with a `user.name` attribute; the resource names the service
`sshd-gateway` on host `bastion-01`. Prints the trace id used, then "sent" once the exporter has
flushed; exits non-zero when the export failed.
"""

import logging
import sys

from opentelemetry import trace
from opentelemetry._logs import set_logger_provider
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.sdk._logs import LoggerProvider, LoggingHandler
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider

endpoint, count = sys.argv[1], int(sys.argv[2])
resource = Resource.create({"service.name": "sshd-gateway", "host.name": "bastion-01"})
trace.set_tracer_provider(TracerProvider(resource=resource))
provider = LoggerProvider(resource=resource)
set_logger_provider(provider)
failed = []


class Checked(OTLPLogExporter):
    def export(self, batch):
        result = super().export(batch)
        if result.name != "SUCCESS":
            failed.append(result)
        return result


provider.add_log_record_processor(SimpleLogRecordProcessor(Checked(endpoint=endpoint, timeout=10)))
logger = logging.getLogger("gateway.auth")
logger.propagate = False
logger.addHandler(LoggingHandler(level=logging.INFO, logger_provider=provider))
logger.setLevel(logging.INFO)

with trace.get_tracer("gateway").start_as_current_span("login") as span:
    print(format(span.get_span_context().trace_id, "032x"), flush=True)
    for i in range(count):
        logger.warning(
            "Failed password for root from 203.0.113.%d port 22 ssh2",
            i % 250,
            extra={"user.name": "root", "net.peer.port": 22},
        )
provider.force_flush()
provider.shutdown()
if failed:
    print("export failed:", failed, flush=True)
    sys.exit(1)
print("sent", flush=True)

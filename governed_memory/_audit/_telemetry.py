"""OpenTelemetry spans for governed operations, and the optional OTLP exporter.

Spans go to the TracerProvider given to :class:`Telemetry`, else to the global
one (``opentelemetry.trace.get_tracer_provider()``), which sends nothing
anywhere until the application installs an SDK provider. governed_memory never
installs a global provider itself; :func:`configure_otlp` builds one for you
to pass in (or to install with ``set_global=True``).

The OTLP/HTTP exporter is an optional extra: ``pip install
'governed-memory[otlp]'``. It is imported only inside :func:`configure_otlp`.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from .._base import VERSION
from .._errors import ConfigurationError

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

    from .._policy import Settings

__all__ = ["INSTRUMENTATION_NAME", "Telemetry", "configure_otlp", "parse_otlp_headers"]

INSTRUMENTATION_NAME = "governed_memory"
_TRACES_PATH = "/v1/traces"
_EXPORTER_MODULE = "opentelemetry.exporter.otlp.proto.http.trace_exporter"


class Telemetry:
    """Emits one span per governed operation.

    Args:
        tracer_provider: where spans go; None uses the global provider
            (looked up once, here).
    """

    def __init__(self, tracer_provider: trace.TracerProvider | None = None) -> None:
        provider = tracer_provider if tracer_provider is not None else trace.get_tracer_provider()
        self._tracer = provider.get_tracer(INSTRUMENTATION_NAME, VERSION)

    def emit(
        self,
        name: str,
        attributes: Mapping[str, Any],
        *,
        error: str | None = None,
        start_time: int | None = None,
    ) -> None:
        """Record one finished operation as a span (status ERROR with ``error``).

        The span is a child of the caller's current span, if any.
        """
        span = self._tracer.start_span(
            name, kind=SpanKind.INTERNAL, attributes=dict(attributes), start_time=start_time
        )
        if error is not None:
            span.set_status(Status(StatusCode.ERROR, error))
        span.end()


def parse_otlp_headers(text: str | None) -> dict[str, str]:
    """``key=value,key=value`` as a dict (values may contain ``=``).

    Raises:
        ConfigurationError: a part has no ``=`` or an empty key (the value is
            not echoed: headers usually hold a token).
    """
    headers: dict[str, str] = {}
    if not text:
        return headers
    for number, part in enumerate(text.split(","), start=1):
        if not part.strip():
            continue
        name, sep, value = part.partition("=")
        if not sep or not name.strip():
            raise ConfigurationError(
                f"GOVERNED_MEMORY_OTLP_HEADERS part {number} is not 'name=value'; write "
                "headers as 'name=value,name=value' (e.g. 'authorization=Bearer <token>')"
            )
        headers[name.strip()] = value.strip()
    return headers


def configure_otlp(settings: Settings, *, set_global: bool = False) -> TracerProvider:
    """Build a TracerProvider that ships spans to the OTLP/HTTP collector in ``settings``.

    Uses ``settings.otlp_endpoint`` (the collector's base URL, e.g.
    ``http://collector:4318``; ``/v1/traces`` is appended unless present),
    ``settings.otlp_headers`` and ``settings.service_name``. Spans are
    batched in a background thread; call ``provider.shutdown()`` at exit to
    flush them.

    Args:
        settings: the runtime settings.
        set_global: also install the provider as the global one.

    Raises:
        ConfigurationError: no endpoint is configured, the headers are
            malformed, or the ``otlp`` extra is not installed.
    """
    if not settings.otlp_endpoint:
        raise ConfigurationError(
            "GOVERNED_MEMORY_OTLP_ENDPOINT is not set, so there is no collector to send spans "
            "to; set it to the collector's OTLP/HTTP URL, e.g. http://localhost:4318"
        )
    try:
        module = importlib.import_module(_EXPORTER_MODULE)
    except ImportError as exc:
        raise ConfigurationError(
            "exporting spans over OTLP needs the optional 'otlp' extra, which is not "
            "installed; run `pip install 'governed-memory[otlp]'` (it adds "
            "opentelemetry-exporter-otlp-proto-http)"
        ) from exc
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    endpoint = settings.otlp_endpoint.rstrip("/")
    if not endpoint.endswith(_TRACES_PATH):
        endpoint += _TRACES_PATH
    secret = settings.otlp_headers.get_secret_value() if settings.otlp_headers else None
    exporter = module.OTLPSpanExporter(endpoint=endpoint, headers=parse_otlp_headers(secret))
    provider = TracerProvider(resource=Resource.create({"service.name": settings.service_name}))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    if set_global:
        trace.set_tracer_provider(provider)
    return provider

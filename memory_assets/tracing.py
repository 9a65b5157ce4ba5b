"""Traces: the package's one tracer, exported over OTLP when an operator sets the endpoint, no-op spans otherwise.

Spans carry ids, names, counts and timings only (`record` drops any string that is not an id), never unit text,
queries or secrets; a failed span keeps the error's type, never its message (messages may quote input).
"""

from __future__ import annotations

import functools
import os
import re
import threading
from collections.abc import Callable, Iterator, Mapping, Sized
from contextlib import AbstractContextManager, contextmanager
from importlib import metadata
from typing import Any, ParamSpec, TypeVar

from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode

from memory_assets import vocabulary as V

P = ParamSpec("P")
R = TypeVar("R")
Value = str | int | float | bool | None  # None: the attribute is left out

# A proxy: its spans go to whichever provider the process sets up, and are no-ops while none is.
_TRACER = trace.get_tracer(V.TRACER_NAME)
_SAFE = re.compile(V.TRACE_VALUE_PATTERN)
_LOCK = threading.Lock()
_state: dict[str, Any] = {"provider": None, "active": False}


def endpoint() -> str | None:
    """The OTLP endpoint traces go to, or None when they are off (no endpoint, or the SDK disabled)."""
    if os.environ.get(V.OTEL_SDK_DISABLED_ENV, "").strip().lower() == "true":
        return None
    return os.environ.get(V.OTEL_ENDPOINT_ENV, "").strip() or None


def resource_attributes(interface: str) -> dict[str, str]:
    """What every span of this process is tagged with: the service, its version and the interface that runs it."""
    try:
        version = metadata.version("memory-assets")
    except metadata.PackageNotFoundError:
        version = "unknown"
    attributes = {"service.version": version, V.TRACE_ATTRIBUTE_PREFIX + "interface": interface}
    if not os.environ.get(V.OTEL_SERVICE_NAME_ENV, "").strip():
        attributes["service.name"] = V.TRACE_SERVICE_NAME
    return attributes


def configure(interface: str) -> bool:
    """Set up OTLP (http/protobuf) export once per process when the endpoint is set, so traces cost nothing unless
    an operator asks for them; idempotent, and a provider the host process already set up is left alone. True when
    spans are exported."""
    if interface not in V.TRACE_INTERFACES:
        raise ValueError(f"interface must be one of {', '.join(V.TRACE_INTERFACES)}")
    if _state["provider"] is not None:
        return True
    trace.get_tracer_provider()  # loads a provider named by OTEL_PYTHON_TRACER_PROVIDER, as the API would
    if endpoint() is None:
        return False
    with _LOCK:
        if _state["provider"] is not None:
            return True
        if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
            _state["provider"] = trace.get_tracer_provider()  # e.g. opentelemetry-instrument: its set-up wins
            return True
        # the SDK and the exporter (protobuf, requests) load only in a process that exports
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        provider = TracerProvider(resource=Resource.create(resource_attributes(interface)))
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))  # reads the OTEL_EXPORTER_OTLP_* vars
        trace.set_tracer_provider(provider)
        _state["provider"] = provider
    return True


def flush() -> None:
    """Send the finished spans now (bounded wait): a worker process may exit without running exit handlers."""
    provider = _state["provider"] or trace.get_tracer_provider()
    force_flush = getattr(provider, "force_flush", None)
    if force_flush is not None:
        force_flush(V.TRACE_FLUSH_TIMEOUT_MILLIS)


def record(span: Span, **attributes: Value) -> None:
    """Set attributes on a span under the package's prefix; a string that is not an id is replaced, None skipped."""
    if not span.is_recording():
        return
    for key, value in attributes.items():
        if value is None:
            continue
        if isinstance(value, str) and not _SAFE.fullmatch(value):
            value = V.TRACE_REDACTED
        span.set_attribute(V.TRACE_ATTRIBUTE_PREFIX + key, value)


def annotate(**attributes: Value) -> None:
    """Record attributes on the current span (the enclosing stage or request), as `record` does."""
    if active():
        record(trace.get_current_span(), **attributes)


def failed(span: Span, error: BaseException) -> None:
    """Mark a span failed with the error's type (and a ValidationError's field), never its message."""
    if not span.is_recording():
        return
    span.set_status(Status(StatusCode.ERROR, type(error).__name__))
    span.set_attribute("error.type", type(error).__name__)
    field = getattr(error, "field", None)
    if isinstance(field, str):
        record(span, field=field)


def active() -> bool:
    """Whether a tracer provider is set up in this process (it never is unset): until one is, spans skip
    OpenTelemetry altogether, whose no-op path costs many times this read of the API's own global (were it renamed,
    every span would take the API's path: slower, still correct)."""
    if not _state["active"]:
        _state["active"] = getattr(trace, "_TRACER_PROVIDER", True) is not None
    return bool(_state["active"])


class _Off:
    """The span of a process without a provider: enters and leaves, records nothing."""

    def __enter__(self) -> Span:
        return trace.INVALID_SPAN

    def __exit__(self, *exc: object) -> None:
        return None


_OFF = _Off()


def span(name: str, **attributes: Value) -> AbstractContextManager[Span]:
    """A child of the current span for one stage; records the attributes given, and the error type if it fails."""
    return _recorded(name, attributes) if active() else _OFF


@contextmanager
def _recorded(name: str, attributes: dict[str, Value]) -> Iterator[Span]:
    with _TRACER.start_as_current_span(name, record_exception=False, set_status_on_exception=False) as current:
        if attributes:
            record(current, **attributes)
        try:
            yield current
        except BaseException as error:
            failed(current, error)
            raise


def traced(name: str, result: Callable[[Any], Mapping[str, Value]] | None = None
           ) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Run a function in a span of its own; `result` turns what it returns into attributes (counts, statuses)."""
    def decorate(function: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(function)
        def call(*args: P.args, **kwargs: P.kwargs) -> R:
            if not active():
                return function(*args, **kwargs)
            with _recorded(name, {}) as current:
                value = function(*args, **kwargs)
                if result is not None and current.is_recording():
                    record(current, **result(value))
                return value
        return call
    return decorate


def fields(*names: str) -> Callable[[Any], dict[str, Value]]:
    """A `traced` result reader: each named field (attribute or key) of a result, a list or dict as its size (a dict
    of counts as their sum), so a span records how many hits or rejections, never what they say."""
    def read(result: Any) -> dict[str, Value]:
        found: dict[str, Value] = {}
        for name in names:
            value = result.get(name) if isinstance(result, Mapping) else getattr(result, name, None)
            if isinstance(value, Mapping):
                value = sum(v for v in value.values() if isinstance(v, (int, float)))
            elif isinstance(value, (list, tuple)):
                value = len(value)
            if value is None or isinstance(value, (str, int, float, bool)):
                found[name] = value
        return found
    return read


def rows(result: Sized) -> dict[str, Value]:
    """A `traced` result reader for a stage that returns rows (a leg, the details, the citations): how many."""
    return {"rows": len(result)}


def candidates(result: Sized) -> dict[str, Value]:
    """A `traced` result reader for fusion: how many candidates it scored."""
    return {"candidates": len(result)}

"""Prometheus' text format for one process: its counted metrics and the store's gauges.

``treadle serve`` (``GET /metrics``) and ``treadle worker``
(``--metrics-port``) each hold one :class:`PrometheusMetrics`: an
OpenTelemetry SDK meter provider whose reader is the Prometheus exporter,
on a registry of its own (so two in one process, as in tests, never mix),
and a :class:`~._gauges.GaugeReader` that reads the store at each scrape.
The SDK and the exporter are the ``metrics`` extra; nothing imports this
module unless metrics are asked for.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from treadle._extras import importing_extra
from treadle._operations._gauges import GaugeReader

with importing_extra("treadle's Prometheus metrics", "metrics"):
    from opentelemetry.exporter.prometheus import PrometheusMetricReader
    from opentelemetry.sdk.metrics import MeterProvider
    from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

    from treadle.otel import OpenTelemetryMetrics

if TYPE_CHECKING:
    from treadle._stores._store import Store
    from treadle._workflow._versions import Hosted

CONTENT_TYPE = CONTENT_TYPE_LATEST
"""The media type of :meth:`PrometheusMetrics.scrape`'s answer."""


class PrometheusMetrics:
    """One process's metrics, exposed in Prometheus' text format.

    Args:
        store: The store whose gauges each scrape reads.
        workflows: Workflows already loaded (to read open requests with).

    Attributes:
        metrics: What runs report to (``RunOptions(metrics=...)``), the
            worker's leases and the webhook sender too.
    """

    def __init__(self, store: Store, workflows: Hosted | None = None) -> None:
        self.registry = CollectorRegistry()
        reader = PrometheusMetricReader(
            disable_target_info=True, scope_info_enabled=False, registry=self.registry
        )
        self.provider = MeterProvider(metric_readers=[reader])
        self.metrics = OpenTelemetryMetrics(self.provider)
        self.gauges = GaugeReader(store, workflows)

    async def scrape(self) -> bytes:
        """Read the store's gauges now, then render every metric."""
        self.metrics.set_store_gauges(await self.gauges.read(time.time()))
        return generate_latest(self.registry)

    def close(self) -> None:
        """Stop the meter provider (nothing more is collected)."""
        self.provider.shutdown()

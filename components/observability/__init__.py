"""Observability: kube-prometheus-stack (Prometheus, Alertmanager, Grafana), the NVIDIA DCGM
exporter on GPU nodes, a PodMonitor per predictor, the platform's rules and dashboards, and
optionally remote write to Amazon Managed Service for Prometheus.

`objects` builds the objects and chart values, `rules` the PrometheusRule groups and
`dashboards` the Grafana dashboards, all as pure functions; `component` applies them.
"""

from .component import Observability, ObservabilityArgs

__all__ = ["Observability", "ObservabilityArgs"]

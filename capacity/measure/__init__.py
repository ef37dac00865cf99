"""Measure a served model: the load generator (config, generator, raw HTTP client, SSE parser,
results, worker processes), the Prometheus collector of the KEDA triggers' signals, the
concurrency sweep, the capacity envelope and its knee, the recommended thresholds and the report."""

"""Scaling-policy simulator: trace replay through engine replicas, Prometheus and KEDA/HPA.

Arrows point one way: `control/` and `cluster/` <- `events`, `exposition`, `results` <- `fleet` <-
`metric_store` <- `simulator` (the event loop, plain data in) <- `oracle`. Nothing here reads
settings: `capacity.planning` adapts a stack to this plain data and reports what it returns.
"""

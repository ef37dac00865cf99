"""Scaling-policy simulator: trace replay through engine replicas, Prometheus and KEDA/HPA."""

"""Scaling-policy simulator: trace replay through engine replicas, Prometheus and KEDA/HPA.

Arrows point one way: `control/` and `cluster/` <- `simulator` (plain data in) <- `oracle` <-
`run` <- `tune`; `from_stack` is the one module that reads settings (a stack file becomes a
`StackModel` and the ScaledObject to simulate); `report` draws what the simulator returns.
"""

"""Capacity tooling, as its pipeline: engine model, workload, measure (load generator, collector, sweep,
envelope, recommendation), mock vLLM, lab, simulator, and the `cli` commands.

Run as `python -m capacity <command>`; see `python -m capacity --help`.
"""

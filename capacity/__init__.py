"""Capacity tooling: engine model, mock vLLM, load generator, collector, envelope and recommendation.

Run as `python -m capacity <command>`; see `python -m capacity --help`.
"""

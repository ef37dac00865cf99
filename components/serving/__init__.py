"""Serving: KServe (Standard mode, external autoscaler) and one vLLM InferenceService per model.

Each predictor runs the pinned vLLM OpenAI server against its model's read-only weights
claim. `objects` builds every object as a pure function, `component` applies them.
"""

from .component import ModelReplicas, Serving, ServingArgs

__all__ = ["ModelReplicas", "Serving", "ServingArgs"]

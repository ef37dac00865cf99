"""Autoscaling: KEDA from its pinned chart and one ScaledObject per model, targeting the
model's predictor Deployment, with one scaler per enabled trigger of `contract.triggers`.

`objects` builds every object as a pure function, `component` applies them.
"""

from .component import Autoscaling, AutoscalingArgs

__all__ = ["Autoscaling", "AutoscalingArgs"]

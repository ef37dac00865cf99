"""Autoscaling: KEDA from its pinned chart and one ScaledObject per model, targeting the
model's predictor Deployment, with one scaler per enabled trigger of `contract.triggers`.

`contract.manifests.scaled_object` builds each ScaledObject as a pure function (the simulator
replays the same object); `component` applies them.
"""

from .component import Autoscaling, AutoscalingArgs

__all__ = ["Autoscaling", "AutoscalingArgs"]

"""Gateway: Envoy Gateway + Envoy AI Gateway in front of every predictor.

One OpenAI-compatible endpoint routes by model name to one AIServiceBackend + Backend per
model. Every policy attaches to the Gateway itself, so it covers every route the Gateway
serves (the AIGatewayRoute and the HTTPRoute the AI gateway generates from it alike):
- SecurityPolicy: API key per client (`Authorization: Bearer <key>`), client id forwarded,
  key stripped before the backend;
- BackendTrafficPolicy: per-client request rate and token budget (global, on Redis + Sentinel);
- BackendSecurityPolicy per backend: the key the predictors require, held only here;
- ClientTrafficPolicy: connection and stream timeouts, buffer limit.

`objects` builds every object as a pure function, `store` the rate-limit store's, `coverage`
proves policy attachment on emitted objects, `component` applies them.
"""

from .component import Gateway, GatewayArgs

__all__ = ["Gateway", "GatewayArgs"]

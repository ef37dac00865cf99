"""A metrics-faithful mock vLLM replica whose timing comes from the engine model.

`replica` drives the engine model in real time and keeps vLLM's metrics (`metrics`), with
injected errors from `faults`; `openai` is the wire format; `app` is the HTTP routes joining
the two; `serving` hosts replicas on ports (`capacity serve`).
"""

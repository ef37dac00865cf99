"""A metrics-faithful mock vLLM replica whose timing comes from the engine model."""

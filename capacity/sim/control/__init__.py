"""The upstream control loop (HPA, KEDA, its cron scaler) and the PromQL semantics its triggers read."""

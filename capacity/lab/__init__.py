"""The capacity loop on any machine: mock replicas and a real Prometheus as child processes on
loopback, a short sweep, and the recommended commands. No GPU, no cloud."""

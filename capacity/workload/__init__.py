"""The traffic the capacity tooling replays: request traces (one loader for the simulator and
the load generator) and the prompts that give a request its token count."""

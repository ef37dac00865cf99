"""Kubernetes manifests the program deploys and the capacity tooling replays, as pure functions of
the settings: the program applies exactly these objects and the simulator reads exactly these
objects (`capacity.sim.scaledobject`), so a simulated policy is the deployed one by construction."""

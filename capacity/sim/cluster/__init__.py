"""The cluster around the engines: pod startup and NodePool placement, the gateway's routers."""

"""The platform's ComponentResources, one module per box of the architecture."""

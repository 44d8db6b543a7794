"""Package data of pymc_dp (read with importlib.resources)."""

__all__: list[str] = []

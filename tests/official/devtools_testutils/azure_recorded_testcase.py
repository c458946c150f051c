def get_credential(is_async=False, **kwargs):
    """AAD credentials: strata (like the emulator) authenticates with the master key only."""
    raise RuntimeError("strata runs the suite against the emulator endpoint with its master key")

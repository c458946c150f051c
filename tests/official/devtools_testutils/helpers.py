def is_live():
    """Live (recorded) mode of the Azure test framework: never, against strata."""
    return getattr(is_live, "_cache", False)

"""A stand-in for the Azure SDK repository's test utilities, which the azure-cosmos test
suite imports but which are not published. strata runs the suite against the emulator
endpoint with the master key (or, in AAD mode, emulator tokens signed with it), so only these
names are needed."""

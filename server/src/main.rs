//! `strata`: the emulator binary. See `strata --help`.

fn main() {
    strata_server::cli::main();
}

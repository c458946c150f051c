//! `strata`: the emulator binary. See `strata --help`.

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    strata_server::cli::main();
}

//! `strata-test-server`: the `strata` command line, built inside the tests package so tests
//! can run it as a separate process (crash tests kill it with SIGKILL).

fn main() {
    strata_server::cli::main();
}

//! AFL++ harness: `sluice_fuzz::hook_http` on every input (see fuzz/README.md).

fn main() {
    afl::fuzz!(|data: &[u8]| sluice_fuzz::hook_http(data));
}

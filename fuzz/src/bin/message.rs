//! AFL++ harness: `sluice_fuzz::message` on every input (see fuzz/README.md).

fn main() {
    afl::fuzz!(|data: &[u8]| sluice_fuzz::message(data));
}

//! placeholder for the command hook kind.

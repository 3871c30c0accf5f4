//! placeholder for the process hook kind.

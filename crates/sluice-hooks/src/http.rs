//! placeholder for the http hook kind.

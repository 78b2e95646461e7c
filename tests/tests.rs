//! The one integration-test binary (one link of RocksDB, not one per file):
//! each module drives the real `simd` binary or the library against a
//! RocksDB index on disk in a temp dir.

mod it;

//! NATS transport benchmarks (being written).
fn main() {}

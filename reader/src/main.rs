mod access;
fn main() {}

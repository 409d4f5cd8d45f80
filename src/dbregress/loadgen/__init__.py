"""The Rust load generator seen from Python (client): where its binary is, how it is
started, and its event stream read."""
